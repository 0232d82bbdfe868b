"""Threads and processes a candidate leaves running after ``run`` returns.

Work that continues after the call returned is not in the timed window. A snapshot lists the
Python threads (``sys._current_frames``, which also sees ``_thread`` threads), the kernel's
threads of the process (``/proc/<pid>/task``: native threads too) and the live descendant
processes (``/proc``, no psutil; zombies do not count). With ``pid`` another process (the parent
watching its worker from outside, which the worker cannot fake) only the last two are available.

Libraries start thread pools and compile workers lazily on first use (OpenMP, Inductor), so the
worker takes its strict baseline after the first call; the first call itself is checked leniently:
only threads running the candidate's own code count (see :func:`check_concurrency`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass

from solbench.guards.findings import REWARD_HACK, Finding


@dataclass(frozen=True)
class ConcurrencySnapshot:
    pid: int
    python_threads: frozenset[int]
    native_threads: frozenset[int]
    processes: frozenset[int]
    group: str | None = None  # the process's own cgroup (v2) folder, when it has one: its processes are read there


def _native_threads(pid: int) -> frozenset[int]:
    try:
        return frozenset(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return frozenset()


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is the state, field 3 of
    proc(5)), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # the command name may contain spaces and ')'


def _proc_stat(pid: str) -> tuple[str, int, int] | None:
    """(state, ppid, session) of a process, or None if it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (fields[0], int(fields[1]), int(fields[3]))


def descendant_processes(pid: int, group: str | None = None) -> frozenset[int]:
    """Live (non-zombie) descendants of ``pid``; if it leads its session, every live process in it.

    With ``group``, the cgroup (v2) folder ``pid`` was placed in alone, its other live processes: all it
    started, wherever they moved in the process tree or to which session (an unprivileged process cannot
    leave its cgroup), read from one file instead of every process's stat (with a dozen workers in
    flight the full scans were 37% of the parent's busy time on the H200, 2026-12-02). A group that
    cannot be read falls back to the scan."""
    if group is not None:
        found = _group_processes(group)
        if found is not None:
            return frozenset(p for p in found if p != pid and (st := _proc_stat(str(p))) is not None
                             and st[0] not in "ZX")
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return frozenset()
    children: dict[int, list[int]] = {}
    live_in_session: set[int] = set()
    leader = _session_leader(pid)
    for e in entries:
        st = _proc_stat(e)
        if st is None or st[0] in "ZX":
            continue
        children.setdefault(st[1], []).append(int(e))
        if leader and st[2] == pid:
            live_in_session.add(int(e))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return frozenset((found | live_in_session) - {pid})


def _group_processes(group: str) -> list[int] | None:
    try:
        with open(os.path.join(group, "cgroup.procs"), encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return None


def _session_leader(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = fh.read().replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return (text[:80] + "...") if len(text) > 80 else (text or "?")


def snapshot_concurrency(pid: int | None = None, group: str | None = None) -> ConcurrencySnapshot:
    """Threads and descendant processes of ``pid`` (this process by default) right now (``group``: its
    own cgroup folder, see :func:`descendant_processes`)."""
    me = os.getpid()
    pid = me if pid is None else pid
    py = frozenset(sys._current_frames()) if pid == me else frozenset()
    return ConcurrencySnapshot(pid, py, _native_threads(pid), descendant_processes(pid, group), group)


def _candidate_site(ident: int, files: Collection[str]) -> str | None:
    """'file.py:12 in fn' when thread ``ident`` runs (or was started on) code from ``files``."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) in files:
            return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    thread = threading._active.get(ident)  # type: ignore[attr-defined]
    code = getattr(getattr(thread, "_target", None), "__code__", None)
    if code is not None and os.path.realpath(code.co_filename) in files:
        return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno} in {code.co_name}"
    return None


def _thread_name(ident: int) -> str:
    thread = threading._active.get(ident)  # type: ignore[attr-defined]
    return thread.name if thread is not None else f"ident {ident}"


def _pending(before: ConcurrencySnapshot, now: ConcurrencySnapshot, native: bool, processes: bool) -> bool:
    """Whether ``now`` holds something new that the check would report (what it does not look at is given no
    grace: the parent's check after every reply, which leaves native threads out, slept 0.1 s on the worker's
    own threads each time, inside the timing window too)."""
    return bool(now.python_threads - before.python_threads or (processes and now.processes - before.processes)
                or (native and now.native_threads - before.native_threads))


def check_concurrency(before: ConcurrencySnapshot, *, candidate_files: Collection[str] | None = None,
                      strict: bool = True, native: bool = True, processes: bool = True,
                      grace_s: float = 0.0) -> list[Finding]:
    """REWARD_HACK findings for threads and processes started since ``before`` and still running.

    Threads: with ``strict`` every new Python thread and (``native``) native thread counts; not
    strict (the first call, before lazy library pools exist) only Python threads running or
    started on code from ``candidate_files``. ``processes``: every new live descendant process
    counts (the worker turns off the one library pool that would be one, Inductor's compile
    workers). ``grace_s``: time given to threads and processes that are already finishing.
    """
    return concurrency_since(before, candidate_files=candidate_files, strict=strict, native=native,
                             processes=processes, grace_s=grace_s)[0]


def concurrency_since(before: ConcurrencySnapshot, *, candidate_files: Collection[str] | None = None,
                      strict: bool = True, native: bool = True, processes: bool = True,
                      grace_s: float = 0.0) -> tuple[list[Finding], ConcurrencySnapshot]:
    """:func:`check_concurrency`'s findings and the snapshot they were read from: the baseline of the next
    check (a fresh one taken after the check would take in, unreported, what started in between)."""
    files = {os.path.realpath(f) for f in candidate_files or ()}
    now = snapshot_concurrency(before.pid, before.group)
    if grace_s > 0 and _pending(before, now, strict and native, processes):
        time.sleep(grace_s)
        now = snapshot_concurrency(before.pid, before.group)
    return findings_between(before, now, files, strict=strict, native=native, processes=processes), now


def findings_between(before: ConcurrencySnapshot, now: ConcurrencySnapshot, files: Collection[str], *,
                     strict: bool = True, native: bool = True, processes: bool = True) -> list[Finding]:
    """The findings of :func:`check_concurrency` from two snapshots (``files``: real paths of the candidate's)."""
    findings = []
    new_py = sorted(now.python_threads - before.python_threads)
    for ident in new_py:
        site = _candidate_site(ident, files) if files else None
        if strict or site:
            where = f" (at {site})" if site else ""
            findings.append(Finding("thread", REWARD_HACK,
                                    f"run() left thread '{_thread_name(ident)}' running after it returned{where}; "
                                    "work after the return is outside the timed window"))
    new_native = len(now.native_threads - before.native_threads) - len(new_py)
    if strict and native and new_native > 0:
        findings.append(Finding("native_thread", REWARD_HACK,
                                f"run() left {new_native} native thread(s) running after it returned; work after the "
                                "return is outside the timed window"))
    for p in sorted(now.processes - before.processes) if processes else []:
        findings.append(Finding("process", REWARD_HACK,
                                f"run() left process {p} ({_cmdline(p)}) running after it returned; work in another "
                                "process is outside the timed window"))
    return findings
