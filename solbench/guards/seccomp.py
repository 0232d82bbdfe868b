"""A seccomp filter for the worker: no change of a file's mode, owner or ACL.

Landlock (ABI <= 7) does not cover chmod, chown or extended attributes, so under its write rules
a candidate could still ``chmod 000`` the results file or its folder and lose the user every
record. :func:`deny_permission_changes` makes these system calls fail with EPERM for the worker
and everything it starts (a filter is inherited across fork and exec and cannot be removed):

* chmod, fchmod, fchmodat, fchmodat2, chown, fchown, lchown, fchownat;
* setxattr and removexattr in all their forms (a POSIX ACL is an extended attribute that changes
  the mode);
* io_uring (its operations, IORING_OP_SETXATTR among them, bypass seccomp) and open_by_handle_at
  (opens a file without a path, out of Landlock's view; only for a worker that kept root);
* every system call of another ABI (x32, or i386 on x86-64), which has other numbers.

So the worker cannot change any file's mode or owner, its own folder's included (a compiler's
``chmod +x`` of what it built fails, and is ignored by the linkers; ``shutil.copy`` fails).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1  # every thread of the process, not only the caller
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | errno.EPERM
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000
_IO_URING = (425, 426, 427)
_XATTR_AT = (463, 466)  # setxattrat, removexattrat (Linux 6.13)
# machine: (AUDIT_ARCH, the seccomp syscall's number, the refused numbers, refuse x32)
_ARCHES = {
    "x86_64": (0xC000003E, 317, (90, 91, 92, 93, 94, 260, 268, 452, 188, 189, 190, 197, 198, 199, 304,
                                 *_IO_URING, *_XATTR_AT), True),
    "aarch64": (0xC00000B7, 277, (52, 53, 54, 55, 452, 5, 6, 7, 14, 15, 16, 265, *_IO_URING, *_XATTR_AT), False),
}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def _program(arch: int, refused: tuple[int, ...], x32: bool) -> list[tuple[int, int, int, int]]:
    """Allow this ABI's calls but ``refused`` (EPERM); refuse every call of another ABI."""
    checks = [(_JGE_K, _X32_BIT)] if x32 else []
    checks += [(_JEQ_K, nr) for nr in refused]
    head = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _RET_EPERM), (_LD_W_ABS, 0, 0, 0)]
    deny = len(head) + len(checks) + 1  # index of the final EPERM
    body = [(code, deny - (len(head) + i) - 1, 0, k) for i, (code, k) in enumerate(checks)]
    return head + body + [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]


def deny_permission_changes() -> str:
    """Install the filter on every thread of this process. Returns what was applied, or why not
    (``"unavailable: ..."``); never raises. Sets no_new_privs (required, and already set by Landlock)."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        return f"unavailable: no filter for {platform.machine()}"
    audit, syscall_nr, refused, x32 = arch
    code = _program(audit, refused, x32)
    instructions = (_Instruction * len(code))(*[_Instruction(*c) for c in code])
    prog = _Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        return f"unavailable: prctl(PR_SET_NO_NEW_PRIVS) failed ({os.strerror(ctypes.get_errno())})"
    if libc.syscall(ctypes.c_long(syscall_nr), ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                    ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)) != 0:
        return f"unavailable: seccomp failed ({os.strerror(ctypes.get_errno())})"
    return "seccomp: chmod, chown, xattr, io_uring and open_by_handle_at refused"
