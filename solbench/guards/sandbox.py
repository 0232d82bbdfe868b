"""Process-level limits for the worker (and one for the parent), through Linux syscalls.

These are not a sandbox (see docs/security.md); they close the channels the exploit corpus uses:

* :func:`restrict_files` (Landlock, Linux >= 5.13, unprivileged): the worker and everything it
  starts may create, write, truncate or delete files only below the given folders, so a candidate
  cannot append forged lines to ``results/*.jsonl``, and may read (and execute) only below the
  given folders, so it cannot read the user's home; where the kernel allows it, also no TCP
  connect/bind and no signals to processes outside the worker (ptrace outside is always denied).
  :func:`restrict_worker` applies the worker's rules (:func:`worker_writable`,
  :func:`worker_readable`); :func:`restrict_writes` limits writes only.
* :func:`become_subreaper`: orphaned descendants (a double-forked daemon) are re-parented to the
  worker instead of init, so the concurrency check still sees them.
* :func:`make_undumpable`: the parent's memory cannot be read or ptraced by a same-user process.
"""

from __future__ import annotations

import ctypes
import os
import stat
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

# Landlock filesystem rights: reading, and those that change the filesystem.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # what a rule on a file (not a folder) may hold
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


# Caches a worker may fill: the client points each into the worker's own folder (and HOME too).
CACHE_VARS = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR",
              "CUDA_CACHE_PATH", "XDG_CACHE_HOME", "TMPDIR")
# System folders a worker may read: libraries, compilers, the CUDA toolkit and driver
# (/usr/local/cuda*, /usr/local/nvidia), interpreters installed under /opt.
SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/nix/store", "/gnu/store")
# Entries of /etc that are never readable (the rest is: ld.so.cache, passwd, alternatives, ssl certs).
ETC_SECRETS = frozenset({
    "shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "ssl/private", "pki/tls/private",
    "security/opasswd", "krb5.keytab", "credstore", "credstore.encrypted", "wireguard", "openvpn", "ipsec.secrets",
    "ipsec.d", "NetworkManager/system-connections", "docker", "containerd", "kubernetes", "letsencrypt", "libvirt",
    "cups/ssl", "samba/private", "netrc", ".pwd.lock",
})
_SHARED_MEMORY = ("shm", "mqueue")  # /dev entries whose files outlive the process that made them


def _inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
    except (OSError, ValueError):
        return False


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _dev_writable(work: Path) -> list[Path]:
    """/dev as a whole when its shm is the worker's own (the private view of a worker that dropped
    root), else every entry but shm and mqueue: a file put there would outlive the worker."""
    if _same_file("/dev/shm", work / "shm"):
        return [Path("/dev")]
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        return []
    return [Path("/dev", n) for n in names if n not in _SHARED_MEMORY and not os.path.islink(Path("/dev", n))]


def default_writable_dirs(work_dir: str | os.PathLike[str]) -> list[Path]:
    """Where a worker legitimately writes: its own folder (with its temp folder, home and JIT caches),
    /dev (null, GPU nodes; shared memory only where it is the worker's own), /proc and /sys.

    /proc and /sys: without them the CUDA driver's initialisation fails with error 304 (seen on the
    H200, 2026-11-30; ``scripts/landlock_cuda_probe.py``: /tmp or /run alone do not help). Neither
    holds results files; what is writable there is the kernel's to police: another process's files
    belong to its user, and the parent's to root (it is undumpable). A cache folder outside the
    worker's folder (HOME or a cache variable pointing elsewhere) is not writable.
    """
    work = Path(work_dir)
    dirs = [work, *_dev_writable(work), Path("/proc"), Path("/sys")]
    home = Path.home()
    candidates = [home / ".triton", home / ".nv", home / ".cupy", home / ".cache"]
    candidates += [Path(os.environ[v]) for v in CACHE_VARS if os.environ.get(v)]
    return dirs + [d for d in candidates if _inside(d, work)]


def _children_except(folder: Path, denied: frozenset[str], prefix: str = "") -> list[Path]:
    """The entries of ``folder`` but those named in ``denied`` (paths relative to the top folder)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out = []
    for name in names:
        rel = prefix + name
        if rel in denied:
            continue
        if any(d.startswith(rel + "/") for d in denied) and (folder / name).is_dir():
            out += _children_except(folder / name, denied, rel + "/")
        else:
            out.append(folder / name)
    return out


def package_folder() -> Path:
    """The solbench package's own folder (this file's grandparent)."""
    return Path(__file__).resolve().parent.parent


def python_paths() -> list[Path]:
    """The Python installation this process runs: its prefixes, every folder on ``sys.path`` and
    the solbench package. The folder holding the package, when it is a source checkout (its results
    too) rather than site-packages, is left out: :func:`restrict_worker` lets the worker list it,
    not read it."""
    import sys

    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)]
    found += [p for p in sys.path if p and os.path.isabs(p)]
    skip = {os.path.realpath(os.getcwd())}
    parent = package_folder().parent
    if not any(_inside(parent, prefix) for prefix in (sys.prefix, sys.base_prefix)):
        skip.add(os.path.realpath(parent))  # a source checkout, not site-packages
    out, seen = [package_folder()], set()
    for p in found:
        real = os.path.realpath(p)
        if os.path.exists(real) and real not in skip and real not in seen:
            seen.add(real)
            out.append(Path(p))
    return out


def worker_readable(extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """What a worker may read besides what it may write: the Python installation, the system's
    libraries and tools (``SYSTEM_READ``), /etc but its secrets (``ETC_SECRETS``), NVIDIA's folders
    in /run, /dev, and ``extra`` (the candidate's folder). Not: homes (the worker's HOME is in its
    own folder), /root, /tmp, /var, /srv, /mnt, /media, the results."""
    system = [Path(p) for p in SYSTEM_READ if os.path.exists(p)]
    run = list(Path("/run").glob("nvidia*")) if os.path.isdir("/run") else []
    return [*python_paths(), *system, *_children_except(Path("/etc"), ETC_SECRETS), *run, Path("/dev"),
            *(Path(p) for p in extra)]


def worker_writable(work_dir: str | os.PathLike[str]) -> list[Path]:
    """Where a worker may write (:func:`default_writable_dirs`)."""
    return default_writable_dirs(work_dir)


def restrict_worker(work_dir: str | os.PathLike[str], readable: Iterable[str | os.PathLike[str]] = (), *,
                    block_tcp: bool = True) -> str:
    """The worker's file rules: writes below :func:`worker_writable`, reads below those and
    :func:`worker_readable` (with ``readable``), and the package's parent folder listed, not read
    (the import system lists every folder on the Python path); TCP blocked unless ``block_tcp`` is off."""
    return restrict_files(worker_writable(work_dir), worker_readable(readable), listable=[package_folder().parent],
                          block_tcp=block_tcp)


def restrict_writes(writable: Iterable[str | os.PathLike[str]], *, block_tcp: bool = True,
                    scope_signals: bool = True) -> str:
    """:func:`restrict_files` with writes limited and reads left as they are."""
    return restrict_files(writable, None, block_tcp=block_tcp, scope_signals=scope_signals)


def restrict_files(writable: Iterable[str | os.PathLike[str]], readable: Iterable[str | os.PathLike[str]] | None,
                   listable: Iterable[str | os.PathLike[str]] = (), *, block_tcp: bool = True,
                   scope_signals: bool = True) -> str:
    """Limit this process and its future children (Landlock) to writing below ``writable`` and, unless
    ``readable`` is None, to reading and executing below ``writable`` and ``readable``; the folders in
    ``listable`` may be listed, their files not read. A path may be a folder or a file.

    Irreversible for the process, and only for the calling thread and those it starts later (the
    worker applies it before it starts any thread of its own). Writable folders that do not exist are
    created first (a cache folder made later would otherwise be read-only); readable ones that do not
    exist are skipped. Returns what was applied, e.g. ``"landlock abi 7: reads, writes, tcp,
    signals"``, or why nothing was (``"unavailable: ..."``); never raises.
    """
    abi = landlock_abi()
    if abi < 1:
        return "unavailable: the kernel has no Landlock (Linux >= 5.13 with landlock enabled)"
    write = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL | (_REFER if abi >= 2 else 0)
    write |= _TRUNCATE if abi >= 3 else 0
    handled = write | (_READ if readable is not None else 0)
    attr = _RulesetAttr(handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if block_tcp and abi >= 4 else 0,
                        _SCOPE_SIGNAL if scope_signals and abi >= 6 else 0)
    for folder in writable:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # a folder we cannot create is simply not writable
    rules = [(Path(p), handled) for p in writable] + [(Path(p), _READ) for p in readable or ()]
    rules += [(Path(p), _READ_DIR) for p in listable] if readable is not None else []
    failed = _apply_ruleset(abi, attr, rules)
    if failed:
        return f"unavailable: {failed}"
    applied = (["reads"] if readable is not None else []) + ["writes"] + (["tcp"] if attr.handled_access_net else [])
    return f"landlock abi {abi}: {', '.join(applied + (['signals'] if attr.scoped else []))}"


def _apply_ruleset(abi: int, attr: _RulesetAttr, rules: list[tuple[Path, int]]) -> str | None:
    """Create the ruleset, add the rules, restrict this thread. None, or what failed."""
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    libc = _libc()
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        for path, access in rules:
            failed = _add_rule(libc, ruleset, path, access & attr.handled_access_fs)
            if failed:
                return failed
        if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
            return "prctl(PR_SET_NO_NEW_PRIVS) failed"
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return None


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: Path, access: int) -> str | None:
    """One path-beneath rule; a path that cannot be opened is skipped (it grants nothing)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS
        if not access:
            return None
        rule = _PathBeneathAttr(access, fd)
        if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            return f"landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(fd)
    return None
