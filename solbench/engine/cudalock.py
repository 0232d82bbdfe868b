"""The CUDA driver's process lock: another worker's device work stopped, and drained, from outside it.

``cuCheckpointProcessLock(pid)`` (the driver's checkpoint API, Linux, driver 550 and later) blocks every
further CUDA API call of process ``pid`` and completes the work it has submitted already; upon success no
work of that process is in flight on the device or can start until ``cuCheckpointProcessUnlock``. The
device gate (:mod:`solbench.engine.gate`) uses it so that a timing window need not wait for a long untimed
request of another worker (a first call that compiles for seconds) to end: the worker is locked, the
window runs, the worker is unlocked. The guarantee is the driver's, not the locked worker's word.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Callable
from typing import Any

from solbench.settings import PROCESS_LOCK_TIMEOUT_MS


class _LockArgs(ctypes.Structure):
    """``CUcheckpointLockArgs`` (cuda.h)."""

    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


class ProcessLocker:
    """``locker(pid)``: the process locked (its unlock returned, which says whether it took), or None when it could
    not be locked within ``timeout_ms`` (it is left running); ``refusals`` counts the driver's codes for those."""

    def __init__(self, lock: Any, unlock: Any, timeout_ms: int) -> None:
        self._lock, self._unlock, self.timeout_ms = lock, unlock, timeout_ms
        self.refusals: Counter[int] = Counter()

    def __call__(self, pid: int) -> Callable[[], bool] | None:
        rc = self._lock(pid, ctypes.byref(_LockArgs(timeoutMs=self.timeout_ms)))
        if rc != 0:
            self.refusals[int(rc)] += 1
            return None
        return lambda: self._unlock(pid, None) == 0


def process_locker(timeout_ms: int = PROCESS_LOCK_TIMEOUT_MS) -> ProcessLocker | None:
    """The driver's process lock (:class:`ProcessLocker`); None where the driver has none."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        lock, unlock = lib.cuCheckpointProcessLock, lib.cuCheckpointProcessUnlock
    except (OSError, AttributeError):
        return None
    lock.argtypes, lock.restype = [ctypes.c_int, ctypes.POINTER(_LockArgs)], ctypes.c_int
    unlock.argtypes, unlock.restype = [ctypes.c_int, ctypes.c_void_p], ctypes.c_int
    return ProcessLocker(lock, unlock, timeout_ms)
