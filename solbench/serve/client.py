"""The client side of the service (`solbench submit`): send a candidate, follow it to the end.

Standard library only (urllib), so submitting needs no extra. A problem given as a folder (or its
problem.yaml) is uploaded with the submission: its top-level files, not its subfolders.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solbench.errors import SolbenchError
from solbench.settings import SUBMIT_POLL_S, SUBMIT_TIMEOUT_S

SERVER_ENV, TOKEN_ENV = "SOLBENCH_SERVER", "SOLBENCH_TOKEN"
DEFAULT_SERVER = "http://127.0.0.1:8000"
UPLOAD_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".txt", ".md", ".cu", ".cuh", ".h")
FINAL = ("done", "failed", "error")


class Client:
    def __init__(self, server: str | None = None, token: str | None = None, timeout_s: float = SUBMIT_TIMEOUT_S):
        self.server = (server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER).rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV)
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """JSON in, JSON out; a refusal or an unreachable server is a SolbenchError of one line."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raise SolbenchError(f"the server refused it (HTTP {err.code}): {_reason(err)}") from None
        except (urllib.error.URLError, OSError) as err:
            why = getattr(err, "reason", err)
            raise SolbenchError(f"cannot reach the server at {self.server} ({why}): start it with `solbench serve` "
                                f"or pass --server URL (or set {SERVER_ENV})") from None

    def submit(self, file: Path, problem: str, workloads: list[str], small: bool) -> dict[str, Any]:
        if not self.token:
            raise SolbenchError(f"no token: pass --token T or set {TOKEN_ENV} (the server's admin makes one with "
                                "`solbench serve token add NAME`)")
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise SolbenchError(f"{file}: cannot read the candidate ({err})") from None
        body: dict[str, Any] = {"filename": file.name, "source": source, "workloads": workloads, "small": small}
        folder = problem_folder(problem)
        if folder is not None:
            body["problem_files"] = folder_files(folder)
        else:
            body["problems"] = [problem]
        return self.request("POST", "/v1/submissions", body)

    def wait(self, sub_id: int, on_record: Callable[[dict[str, Any]], None], poll_s: float = SUBMIT_POLL_S) -> dict[str, Any]:
        """Poll until the submission is final; each new record goes to ``on_record`` as it arrives."""
        after, records = 0, []
        while True:
            sub = self.request("GET", f"/v1/submissions/{sub_id}?after={after}")
            for r in sub["records"]:
                after = max(after, r["_row"])
                records.append(r)
                on_record(r)
            if sub["state"] in FINAL:
                sub["records"] = records
                return sub
            time.sleep(poll_s)


def problem_folder(problem: str) -> Path | None:
    """The folder to upload when ``problem`` is a path (a folder or its problem.yaml), else None."""
    p = Path(problem)
    if p.is_file() and p.name == "problem.yaml":
        return p.parent
    if p.is_dir():
        if not (p / "problem.yaml").is_file():
            raise SolbenchError(f"--problem {problem}: a folder without problem.yaml; give a problem folder or a "
                                "library id")
        return p
    return None


def folder_files(folder: Path) -> dict[str, str]:
    """A problem folder's top-level text files by name (subfolders such as solutions/ stay home)."""
    out = {}
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix in UPLOAD_SUFFIXES:
            try:
                out[f.name] = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise SolbenchError(f"{f}: cannot read it to upload ({err})") from None
    return out


def _reason(err: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(err.read()).get("error") or err.reason)
    except (ValueError, AttributeError, OSError):
        return str(err.reason)
