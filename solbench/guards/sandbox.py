"""Process-level limits for the worker (and one for the parent), through Linux syscalls.

These are not a sandbox (see docs/security.md); they close the channels the exploit corpus uses:

* :func:`restrict_writes` (Landlock, Linux >= 5.13, unprivileged): the worker and everything it
  starts may create, write, truncate or delete files only below the given folders, so a candidate
  cannot append forged lines to ``results/*.jsonl``; where the kernel allows it, also no TCP
  connect/bind and no signals to processes outside the worker (ptrace outside is always denied).
* :func:`become_subreaper`: orphaned descendants (a double-forked daemon) are re-parented to the
  worker instead of init, so the concurrency check still sees them.
* :func:`make_undumpable`: the parent's memory cannot be read or ptraced by a same-user process.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on x86_64 and aarch64
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38

# Landlock filesystem rights that change the filesystem (reading and executing stay unrestricted).
_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_SIGNAL = 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> bool:
    try:
        return _libc().prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                             ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER). True if the kernel accepted it."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: same-user processes can no longer ptrace this one or read /proc/<pid>/mem."""
    return _prctl(_PR_SET_DUMPABLE, 0)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    try:
        v = _libc().syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(v), 0)


def default_writable_dirs(work_dir: str | os.PathLike[str]) -> list[Path]:
    """Where a worker legitimately writes: its own folder, /dev (null, shm, GPU nodes), /proc and
    /sys, and the JIT caches of Triton, CUDA, CuPy, Inductor and torch extensions.

    /proc and /sys: without them the CUDA driver's initialisation fails with error 304 (seen on the
    H200, 2026-11-30; ``scripts/landlock_cuda_probe.py``: /tmp or /run alone do not help). Neither
    holds results files; what is writable there is the kernel's to police (most of it root-only).
    """
    home = Path.home()
    dirs = [Path(work_dir), Path("/dev"), Path("/proc"), Path("/sys"), home / ".triton", home / ".nv",
            home / ".cupy", home / ".cache"]
    for var in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR",
                "CUDA_CACHE_PATH", "XDG_CACHE_HOME"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]))
    return dirs


def restrict_writes(writable: Iterable[str | os.PathLike[str]], *, block_tcp: bool = True,
                    scope_signals: bool = True) -> str:
    """Limit this process and its future children to writing below ``writable`` (Landlock).

    Irreversible for the process. Folders that do not exist are created first (a cache folder
    made later would otherwise be read-only). Returns what was applied, e.g. ``"landlock abi 7:
    writes, tcp, signals"``, or why nothing was (``"unavailable: ..."``); never raises.
    """
    abi = landlock_abi()
    if abi < 1:
        return "unavailable: the kernel has no Landlock (Linux >= 5.13 with landlock enabled)"
    fs = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    fs |= _REFER if abi >= 2 else 0
    fs |= _TRUNCATE if abi >= 3 else 0
    attr = _RulesetAttr(fs, (_NET_BIND_TCP | _NET_CONNECT_TCP) if block_tcp and abi >= 4 else 0,
                        _SCOPE_SIGNAL if scope_signals and abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    libc = _libc()
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unavailable: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        for folder in writable:
            path = Path(folder)
            try:
                path.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder we cannot create or open is simply not writable
            try:
                rule = _PathBeneathAttr(fs, fd)
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    return f"unavailable: landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
            return "unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed"
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    applied = ["writes"] + (["tcp"] if attr.handled_access_net else []) + (["signals"] if attr.scoped else [])
    return f"landlock abi {abi}: {', '.join(applied)}"
