"""The results store: JSON lines, appended under a file lock, read back tolerantly.

Writers take an exclusive lock (filelock) and append whole lines with one write + fsync, so
concurrent runs lose nothing and a kill mid-run leaves every earlier line readable. A torn last
line (a writer killed mid-write) is skipped by readers with a warning, and the next writer
starts on a fresh line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filelock import FileLock

from solbench.data.record import ResultRecord


def _lock_for(path: Path) -> FileLock:
    return FileLock(str(path) + ".lock", timeout=60)


def append_records(path: str | Path, records: Iterable[ResultRecord | dict[str, Any]]) -> int:
    """Append records to a JSONL file (created with its folder if needed). Returns lines written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in records:
        if isinstance(r, ResultRecord):
            lines.append(r.to_json_line())
        else:
            lines.append(json.dumps(r, default=str) + "\n")
    if not lines:
        return 0
    with _lock_for(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            prefix = ""
            if size:
                with open(path, "rb") as fh:
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        prefix = "\n"  # a torn line from a killed writer: start clean
            os.write(fd, (prefix + "".join(lines)).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    return len(lines)


def read_records(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """All records from JSONL files or folders of them; unreadable lines become warnings."""
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.rglob("*.jsonl")))
        elif p.is_file():
            files.append(p)
        else:
            warnings.append(f"{p}: no such file or folder")
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    warnings.append(f"{f}:{lineno}: unreadable line skipped ({err.msg})")
                    continue
                if not isinstance(obj, dict) or "problem" not in obj or "status" not in obj:
                    warnings.append(f"{f}:{lineno}: not a result record, skipped")
                    continue
                obj.setdefault("_source", f"{f}:{lineno}")
                records.append(obj)
    return records, warnings
