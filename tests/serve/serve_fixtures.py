"""A real `solbench serve` for the service's tests: a subprocess on a free port of 127.0.0.1, a
temporary SQLite file (or the PostgreSQL of ``SOLBENCH_TEST_POSTGRES_URL``), the tiny test library,
and a token made with `solbench serve token add`. (A module of its own, not a conftest: the tests'
root has a conftest of its own, and two modules named ``conftest`` cannot both be imported.)"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason='the service\'s extra is not installed: pip install "solbench[serve]"')

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
TINY = TESTS / "fixtures" / "tiny"
CANDIDATES = TESTS / "candidates"
POSTGRES_ENV = "SOLBENCH_TEST_POSTGRES_URL"


def solbench(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_token(db: str, name: str = "tester", *extra: str) -> str:
    proc = solbench("serve", "token", "add", name, "--db", db, *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@dataclass
class Server:
    db: str
    port: int
    args: tuple[str, ...]
    proc: subprocess.Popen | None = None
    log: Path | None = None
    problems: Path = TINY

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> Server:
        cmd = [sys.executable, "-m", "solbench", "serve", "--db", self.db, "--port", str(self.port), "--device", "cpu",
               "--budget", "0.05", "--timeout", "30", "--compile-timeout", "60", "--problems", str(self.problems), *self.args]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the server exited: {self.log_text()}"
            try:
                if request(self, "GET", "/")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"the server did not answer within {timeout} s: {self.log_text()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log and self.log.exists() else ""


def request(server: Server, method: str, path: str, body: bytes | str | dict | None = None,
            headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, bytes, dict[str, str]]:
    """One raw HTTP request (any bytes, any headers): status, body, headers."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    if isinstance(body, dict):
        body = json.dumps(body)
        headers = {"Content-Type": "application/json", **(headers or {})}
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def submit(server: Server, token: str | None, candidate: Path, problems: list[str], **fields) -> tuple[int, dict]:
    body = {"filename": candidate.name, "source": candidate.read_text(), "problems": problems, **fields}
    status, data, _ = request(server, "POST", "/v1/submissions", body,
                              {"Authorization": f"Bearer {token}"} if token else {})
    return status, json.loads(data)


def wait_final(server: Server, sub_id: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data, _ = request(server, "GET", f"/v1/submissions/{sub_id}")
        assert status == 200, data
        sub = json.loads(data)
        if sub["state"] in ("done", "failed", "error"):
            return sub
        time.sleep(0.5)
    raise AssertionError(f"submission {sub_id} not final after {timeout} s: {server.log_text()}")


def postgres_url() -> str:
    """The test PostgreSQL's URL, or the test skips saying how to give one."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL to test against: set {POSTGRES_ENV}=postgresql://USER@127.0.0.1:PORT/DB "
                    "(.ci/run starts one where it can install it)")
    return url


def fresh_postgres(url: str) -> str:
    """A new empty database on the test server, so tests never see each other's rows."""
    import psycopg

    name = f"solbench_test_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name
