"""The results store: JSON lines, appended under a file lock, read back tolerantly.

Writers take an exclusive lock on the results file itself (``flock`` on its descriptor: no lock file
is left beside it) and append whole lines with one write + fsync, so concurrent runs lose nothing and a kill mid-run leaves every earlier line readable. A torn last
line (a writer killed mid-write) is skipped by readers with a warning, and the next writer
starts on a fresh line.

Readers trust nothing: every line is checked against the record schema (:class:`ResultRecord`)
and a line that fails is skipped with one warning, ``file:line: reason``; the rest of the file is
read. Beyond the schema a line must nest at most ``MAX_DEPTH`` levels (a record nests four) and
hold no integer outside 64 bits (no count, size or axis is that large; Python would refuse to read
one of more than 4300 digits, and pandas one beyond a double). Whether the numbers make sense
(a SOL of 1e308) is for the presentation layer to judge: here a record is only well-formed.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.data.record import ResultRecord, read_record, upgrade
from solbench.errors import error_message

MAX_DEPTH = 32  # nesting levels of a line; a record has four (telemetry.cupti.kernels.<name>)
_INT_RANGE = (-(2**63), 2**64)

SOURCE_KEY = "_source"  # the reader's own key: the file and line a record was read from


def append_records(path: str | Path, records: Iterable[ResultRecord | dict[str, Any]]) -> int:
    """Append records to a JSONL file (created with its folder if needed). Returns lines written. A
    :class:`ResultRecord` is checked again first (pydantic's ValidationError when it no longer is one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in records:
        if isinstance(r, ResultRecord):
            # Its parts may have changed since it was made (the engine adds the harness's phases): a line the
            # readers would skip is not written.
            ResultRecord.model_validate(r.model_dump())
            lines.append(r.to_json_line())
        else:
            lines.append(json.dumps(r, default=str) + "\n")
    if not lines:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor is closed
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


def append_record_checked(path: str | Path, record: ResultRecord) -> str | None:
    """Append one record; where it no longer validates (a hook or the harness added an undeclared key or
    a wrong type), write nothing and return one line naming the record and the first error (a
    harness bug to report), so a run goes on and its results file stays readable."""
    try:
        append_records(path, [record])
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"])[:120]
        return (f"solbench: the record of {record.problem} {record.workload} {record.solution} was not written: "
                f"{where}: {first['msg']} (a harness or hook bug: please report it)")
    return None


def read_records(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """All records from JSONL files (gzipped ones too: ``.jsonl.gz``) or folders of them, as dicts with
    ``_source`` ("file:line").

    A line that is not a well-formed record is skipped with a warning ``file:line: reason``; an
    unreadable file or a missing path is one warning too. Nothing in a file makes this raise.
    """
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    for f in _result_files(paths, warnings):
        _read_file(f, records, warnings)
    return records, warnings


def _result_files(paths: Iterable[str | Path], warnings: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in sorted([*p.rglob("*.jsonl"), *p.rglob("*.jsonl.gz")]) if f.is_file())
        elif p.is_file():
            files.append(p)
        elif p.exists():
            warnings.append(f"{p}: not a regular file or folder, skipped")
        else:
            warnings.append(f"{p}: no such file or folder")
    return files


def _read_file(f: Path, records: list[dict[str, Any]], warnings: list[str]) -> None:
    opener = gzip.open if f.name.endswith(".gz") else open
    try:
        with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                obj, problem = parse_record_line(line)
                if obj is None:
                    warnings.append(f"{f}:{lineno}: {problem}")
                    continue
                obj[SOURCE_KEY] = f"{f}:{lineno}"  # where it came from, whatever the line says
                records.append(obj)
    except (OSError, EOFError, zlib.error) as err:  # a gzip cut short or damaged: what was read is kept
        warnings.append(f"{f}: unreadable ({getattr(err, 'strerror', None) or err}), skipped")


class _BadLine(ValueError):
    """A line's JSON holds something no record can (raised from inside the decoder)."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > 20:  # before int(): Python refuses more than 4300 digits, and slowly
        raise _BadLine(f"an integer of {digits} digits, beyond 64 bits")
    value = int(text)
    if not _INT_RANGE[0] <= value < _INT_RANGE[1]:
        raise _BadLine(f"an integer of {digits} digits, beyond 64 bits")
    return value


_DECODER = json.JSONDecoder(parse_int=_bounded_int)


def _too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest more than ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _schema_problem(err: ValidationError) -> str:
    """The first schema error in one line: the field (record text, so quoted and cut) and why."""
    errors = err.errors(include_url=False, include_input=False)
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"])
    where = f"{ascii(field[:80])[1:-1]}: " if field else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"not a valid record: {where}{error_message(first)}{more}, line skipped"


def parse_record_line(line: str) -> tuple[dict[str, Any] | None, str]:
    """One line as a record dict, or None and why it is not one (a phrase for ``file:line: ...``)."""
    try:
        obj = _DECODER.decode(line)
    except RecursionError:
        return None, f"not a valid record: nested more than {MAX_DEPTH} levels deep, line skipped"
    except _BadLine as err:
        return None, f"unreadable line skipped ({err})"
    except ValueError as err:  # JSONDecodeError
        return None, f"unreadable line skipped ({getattr(err, 'msg', 'not JSON')})"
    if not isinstance(obj, dict) or "problem" not in obj or "status" not in obj:
        return None, "not a result record, line skipped"
    obj = upgrade(obj)  # an older record_version as this version reads it
    if line.count("{") + line.count("[") > MAX_DEPTH and _too_deep(obj):
        return None, f"not a valid record: nested more than {MAX_DEPTH} levels deep, line skipped"
    try:
        read_record({k: v for k, v in obj.items() if k != SOURCE_KEY})
    except ValidationError as err:
        return None, _schema_problem(err)
    return obj, ""
