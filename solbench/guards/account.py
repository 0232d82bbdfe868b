"""The worker's account: an unprivileged user when solbench runs as root, and first in line for the OOM killer.

The worker calls these at start-up (:mod:`solbench.worker.main`), before the candidate is imported:

* :func:`prefer_for_oom`: ``oom_score_adj`` 1000, so a memory blow-up kills the worker (and what it
  started), not the parent. Set while still root, it also becomes the floor the worker cannot go
  below; a worker of a non-root user can lower it again, but only down to what it inherited.
* :func:`private_view` (root only): a mount and IPC namespace of its own, in which

  - ``/dev/shm`` is the worker folder's ``shm/`` (and SysV shared memory and message queues are the
    namespace's): what a candidate puts there goes with the folder;
  - every path the worker needs (the Python installation, the candidate's folder, its own folder)
    can be reached by the unprivileged user: a folder on the way that the user may not enter (a
    home of mode 700, pytest's temp folders) is covered by an empty tmpfs into which only the
    entries on the way are bound back, so the rest of that folder is not even visible.
* :func:`drop_privileges`: the user's uid and gid for good (real, effective and saved; no
  supplementary groups), checked by trying to get root back.

:func:`resolve_account` is the parent's: the uid and gid to run workers as, from a setting.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import stat
from collections.abc import Iterable
from pathlib import Path

from solbench.errors import SolbenchError

_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
OOM_SCORE_ADJ = 1000
NO_DROP = ("root", "0")  # worker_user values that keep the worker root


def resolve_account(user: str) -> tuple[int, int] | None:
    """(uid, gid) the workers run as when this process is root, None when they keep this process's
    user (not root, or ``user`` is root). ``user`` is a name or ``uid[:gid]``."""
    if os.geteuid() != 0 or user in NO_DROP:
        return None
    name, _, group = user.partition(":")
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        uid, gid = entry.pw_uid, entry.pw_gid
    except KeyError:
        if not name.isdigit():
            raise SolbenchError(f"worker user {name!r} does not exist: create it, or give a uid such as "
                                "65534") from None
        uid, gid = int(name), int(name)
    gid = int(group) if group.isdigit() else gid
    if uid == 0:
        return None
    return uid, gid


def parse_account(text: str) -> tuple[int, int]:
    """``"uid:gid"`` as the worker gets it on its command line."""
    uid, _, gid = text.partition(":")
    return int(uid), int(gid or uid)


def prefer_for_oom(value: int = OOM_SCORE_ADJ) -> bool:
    """Set this process's ``oom_score_adj`` (inherited by its children). True if it took."""
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as fh:
            fh.write(str(value))
        return True
    except OSError:
        return False


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good, every thread of the process. Raises OSError if root stays."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError("root could be taken back after the drop")


# --- the private view -------------------------------------------------------------------------

def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _enc(value: str | Path | None) -> bytes | None:
    return None if value is None else str(value).encode()


def _mount(source: str | None, target: str | Path, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = _enc
    if _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _allowed(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Would ``uid``/``gid`` (no other group) get ``bits`` (4 read, 1 execute) by the mode alone?"""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & bits == bits


def _blocked(paths: Iterable[str | os.PathLike[str]], uid: int, gid: int) -> dict[Path, set[str] | None]:
    """Folders the user cannot pass on the way to ``paths`` -> the names to keep in them; None: a
    folder the user must read (one of ``paths``), everything in it is kept."""
    plan: dict[Path, set[str] | None] = {}
    for given in paths:
        for path in {Path(os.path.abspath(given)), Path(os.path.realpath(given))}:
            if not path.exists():
                continue
            for i in range(1, len(path.parts)):  # every folder on the way, / first
                folder = Path(*path.parts[:i])
                if not _allowed(os.stat(folder), uid, gid, 1):
                    keep = plan.setdefault(folder, set())
                    if keep is not None:
                        keep.add(path.parts[i])
            if path.is_dir() and not _allowed(os.stat(path), uid, gid, 5):
                plan[path] = None
    return plan


def _cover(folder: Path, keep: set[str] | None) -> None:
    """An empty tmpfs over ``folder`` with ``keep`` (None: every entry) bound back in from below it."""
    names = sorted(os.listdir(folder)) if keep is None else sorted(keep)
    links = {n: os.readlink(folder / n) for n in names if os.path.islink(folder / n)}
    fds = {}
    for n in names:
        if n not in links:
            try:
                fds[n] = os.open(folder / n, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
    try:
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        for n, target in links.items():
            os.symlink(target, folder / n)
        for n, fd in fds.items():
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(folder / n)
            else:
                open(folder / n, "wb").close()  # noqa: SIM115 - an empty file to mount on
            _mount(f"/proc/self/fd/{fd}", folder / n, None, _MS_BIND | _MS_REC)
    finally:
        for fd in fds.values():
            os.close(fd)


def private_view(reach: Iterable[str | os.PathLike[str]], uid: int, gid: int, shm: Path | None) -> str:
    """Enter a private mount and IPC namespace where ``uid``/``gid`` can reach and read ``reach``
    and ``/dev/shm`` is ``shm``. Root only. Returns what it did; where namespaces are refused and
    nothing needs covering, says so and carries on; raises OSError otherwise."""
    plan = _blocked(reach, uid, gid)
    if _libc().unshare(ctypes.c_int(_CLONE_NEWNS | _CLONE_NEWIPC)) != 0:
        err = ctypes.get_errno()
        if plan:
            raise OSError(err, f"unshare: {os.strerror(err)}, and {', '.join(map(str, plan))} must be covered")
        return f"unavailable: unshare: {os.strerror(err)} (nothing needed covering; /dev/shm is the system's)"
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
    done = []
    if shm is not None and os.path.isdir("/dev/shm"):
        shm.mkdir(exist_ok=True)
        os.chown(shm, uid, gid)
        _mount(str(shm), "/dev/shm", None, _MS_BIND)
        done.append(f"/dev/shm is {shm}")
    for folder in sorted(plan, key=lambda p: len(p.parts)):
        _cover(folder, plan[folder])
    if plan:
        done.append(f"covered {', '.join(str(f) for f in sorted(plan))}")
    return "private: " + ("; ".join(done) or "nothing to change")
