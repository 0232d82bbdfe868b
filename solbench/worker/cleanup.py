"""Nothing a worker started outlives it: its processes (those that left its session too), its folder,
and what a killed parent left behind.

* Folders: each worker's is ``solbench-worker-*`` under the temp folder, with an ``owner.pid`` (the
  parent's pid and start time). :func:`sweep_dead_workers`, at a run's start, removes the folders
  (and cgroups) of parents that are gone, and folders without an owner file (an older solbench's)
  that no process works in and nothing touched for an hour; :func:`remove_tree` removes a folder
  whatever modes the candidate left in it.
* Signals: :func:`stop_on_signals` turns SIGTERM and SIGHUP of the parent into ``SystemExit(128 + n)``
  (SIGINT already raises KeyboardInterrupt), so the run's own clean-up runs; :func:`track` keeps every
  live worker for an ``atexit`` clean-up behind that.
* Processes: a worker is a child subreaper, so its orphans stay its descendants while it lives.
  :func:`join_cgroup` puts it in a cgroup v2 of its own where one can be made (root, or a delegated
  hierarchy); :func:`kill_tree` kills that cgroup and then every descendant and member of the
  worker's session found in ``/proc`` (stopped first, walked again until no new one appears), so
  children that called ``setsid`` go too. Without a cgroup, the processes of a worker that already
  died on its own can no longer be told apart (they were re-parented to init).
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from solbench.guards import descendant_processes

PREFIX = "solbench-worker-"
OWNER_FILE = "owner.pid"
LEGACY_AGE_S = 3600.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_WALK_ROUNDS = 100


# --- folders -----------------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (with its pid: which process it is), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def write_owner(folder: Path) -> None:
    """Mark ``folder`` as this process's: its pid and start time."""
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n", encoding="ascii")


def _owner_gone(folder: Path) -> bool:
    """True when the folder's owner file names a process that no longer runs. A folder without one
    (being made, or not solbench's) is never called gone; nor one whose file another user wrote."""
    path = folder / OWNER_FILE
    try:
        if path.stat().st_uid != os.geteuid():
            return False
        pid, started = path.read_text(encoding="ascii").split()
    except (OSError, ValueError):
        return False
    return not pid.isdigit() or _start_time(int(pid)) != started


def _working_folders() -> set[str]:
    """The working folders of the processes this one may look at (a worker's is its folder)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found.add(os.readlink(f"/proc/{entry}/cwd"))
            except OSError:
                continue
    return found


def _unmarked_and_abandoned(folder: Path, in_use: set[str]) -> bool:
    """A folder of a solbench before owner files: ours, untouched for an hour, no process works in it."""
    try:
        st = folder.stat()
    except OSError:
        return False
    return (st.st_uid == os.geteuid() and not (folder / OWNER_FILE).exists()
            and time.time() - st.st_mtime > LEGACY_AGE_S and str(folder) not in in_use)


def _dead_or_abandoned(folder: Path, in_use: set[str]) -> bool:
    """True for a worker folder this process may and should remove; never raises (another user's
    folder, one it cannot open, is left alone)."""
    try:
        return _owner_gone(folder) or _unmarked_and_abandoned(folder, in_use)
    except OSError:
        return False


def sweep_dead_workers(tmp: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the worker folders (and cgroups) left by runs whose parent is gone, and unmarked ones
    (older solbench) abandoned for an hour. Returns them. What cannot be looked at is skipped."""
    removed = []
    try:
        folders = [f for f in sorted(Path(tmp or tempfile.gettempdir()).glob(PREFIX + "*"))
                   if f.is_dir() and not f.is_symlink()]
    except OSError:
        return []
    in_use = _working_folders() if folders else set()
    for folder in folders:
        if _dead_or_abandoned(folder, in_use):
            kill_leftovers(folder)
            remove_tree(folder)
            remove_cgroup(folder.name)
            removed.append(folder)
    return removed


_FOLDER_VARS = (b"HOME=", b"TMPDIR=", b"XDG_CACHE_HOME=")


def _works_in(pid: str, folder: str) -> bool:
    """Whether process ``pid`` works in ``folder``: its working folder or its HOME, TMPDIR or cache
    (a worker's children inherit all of them) lie below it, the folder since removed or not."""
    below = (folder, folder + "/", folder + " (deleted)")
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        if cwd == folder or cwd.startswith(below[1]):
            return True
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return False
    prefix = folder.encode()
    return any(item.startswith(var) and (item[len(var):] == prefix or item[len(var):].startswith(prefix + b"/"))
               for item in env for var in _FOLDER_VARS)


def kill_leftovers(folder: Path) -> int:
    """SIGKILL what a dead worker left running (its parent and it were killed with SIGKILL, so nothing
    of theirs cleaned up): the processes of its cgroup, and those of the folder's owner that work in
    the folder (:func:`_works_in`), ``setsid`` children included. Never this process. How many."""
    base = _cgroup_base()
    if base is not None and (base / folder.name).is_dir():
        _kill_cgroup(base / folder.name)
    try:
        owner, entries = folder.stat().st_uid, [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return 0
    killed = 0
    for entry in entries:
        try:
            mine = os.stat(f"/proc/{entry}").st_uid == owner and int(entry) != os.getpid()
        except OSError:
            continue
        if mine and _works_in(entry, str(folder)):
            _signal(int(entry), signal.SIGKILL)
            killed += 1
    return killed


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int | None) -> int | None:
    """Open a folder (not a link) for removal, giving its owner rwx if it was left locked; None if not."""
    for attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except PermissionError:
            if attempt == 0:
                try:
                    os.chmod(name, 0o700, dir_fd=dir_fd)
                except OSError:
                    return None
        except OSError:
            return None
    return None


def _entries(fd: int) -> list[tuple[str, bool]]:
    """(name, is a folder) of what a folder holds; [] if it cannot be listed."""
    try:
        with os.scandir(fd) as it:
            return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return []


def remove_tree(path: Path) -> None:
    """Remove a folder and everything in it, at any depth (a loop, not recursion: a candidate may
    leave thousands of nested folders), opening up folders left locked and skipping what cannot be
    removed. Folders are entered by descriptor, never by path: deep paths exceed PATH_MAX, and a
    folder swapped for a link is not followed."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
    except OSError:
        return
    fd = _open_dir(str(path), None)
    if fd is None:
        return
    stack: list[tuple[str, list[tuple[str, bool]]]] = [("", _entries(fd))]  # (name in parent, to do)
    while stack:
        pending = stack[-1][1]
        if pending:
            name, is_dir = pending.pop()
            child = _open_dir(name, fd) if is_dir else None
            if child is not None:
                os.close(fd)
                fd = child
                stack.append((name, _entries(fd)))
            elif not is_dir:
                _quietly(os.unlink, name, dir_fd=fd)
            continue
        name, _ = stack.pop()
        if not stack:
            break
        parent = _open_dir("..", fd)
        os.close(fd)
        if parent is None:
            return
        fd = parent
        _quietly(os.rmdir, name, dir_fd=fd)
    os.close(fd)
    _quietly(os.rmdir, path)


def _quietly(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except OSError:
        pass


# --- signals and exit --------------------------------------------------------------------------

_LIVE: set[Any] = set()


def track(worker: Any) -> None:
    """Remember a live worker (anything with ``discard()``) for the clean-up at exit."""
    _LIVE.add(worker)


def untrack(worker: Any) -> None:
    _LIVE.discard(worker)


@atexit.register
def _discard_all() -> None:
    for worker in list(_LIVE):
        try:
            worker.discard()
        except Exception:  # noqa: BLE001, S112 - exiting: clean up what can be cleaned
            continue


def _raise_exit(signum: int, frame: Any) -> None:
    for s in _STOP_SIGNALS:  # one stop is enough: the clean-up runs undisturbed
        signal.signal(s, signal.SIG_IGN)
    raise SystemExit(128 + signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``SystemExit(128 + signal)`` (main thread only; elsewhere
    nothing changes), so ``finally`` blocks stop the workers and remove their folders."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise_exit) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


# --- processes ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _cgroup_base() -> Path | None:
    """This process's own cgroup v2 folder, or None (no cgroup v2 mounted)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            mounts = [ln.split() for ln in fh]
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            own = next((ln.strip()[3:] for ln in fh if ln.startswith("0::")), None)
    except OSError:
        return None
    for fields in mounts:
        if "-" in fields and fields[fields.index("-") + 1] == "cgroup2" and own is not None:
            root = Path(fields[4]) / own.lstrip("/")
            return root if root.is_dir() else None
    return None


def join_cgroup(pid: int, name: str) -> Path | None:
    """Put process ``pid`` in a new cgroup ``name`` below this process's own (cgroup v2), so that
    everything it starts can be killed at once. None where no cgroup can be made here."""
    base = _cgroup_base()
    if base is None:
        return None
    group = base / name
    try:
        group.mkdir()
    except OSError:
        return None
    try:
        (group / "cgroup.procs").write_text(str(pid), encoding="ascii")
    except OSError:
        remove_cgroup(name)
        return None
    return group


def _cgroup_pids(group: Path) -> list[int]:
    try:
        return [int(x) for x in (group / "cgroup.procs").read_text(encoding="ascii").split()]
    except (OSError, ValueError):
        return []


def _kill_cgroup(group: Path) -> None:
    """SIGKILL everything in the cgroup (cgroup.kill, Linux >= 5.14; else pid by pid) and wait for it."""
    try:
        (group / "cgroup.kill").write_text("1", encoding="ascii")
    except OSError:
        pass
    for _ in range(200):
        pids = _cgroup_pids(group)
        if not pids:
            return
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.005)


def remove_cgroup(name: str) -> None:
    """Remove the cgroup ``name`` below this process's own, once it is empty; never raises."""
    base = _cgroup_base()
    if base is not None and (base / name).is_dir():
        for _ in range(100):
            try:
                (base / name).rmdir()
                return
            except OSError:
                time.sleep(0.01)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _walk_and_stop(pid: int, found: Callable[[int], frozenset[int]]) -> set[int]:
    """Stop every descendant of ``pid``, walking again until no new one appears."""
    stopped: set[int] = set()
    for _ in range(_WALK_ROUNDS):
        new = found(pid) - stopped
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        stopped |= new
    return stopped


def kill_tree(pid: int, group: Path | None = None, include_root: bool = True) -> int:
    """SIGKILL ``pid`` (with ``include_root``), its cgroup ``group`` and every descendant and session
    member of it, those in new sessions too. Returns how many descendants were found in /proc."""
    if include_root:
        _signal(pid, signal.SIGSTOP)  # no new children while the tree is walked
    stopped = _walk_and_stop(pid, descendant_processes)
    if group is not None and include_root:
        _kill_cgroup(group)
    for p in stopped:
        _signal(p, signal.SIGKILL)
    if include_root:
        _signal(pid, signal.SIGKILL)
    return len(stopped)
