"""The CUDA runtime library, for the few calls torch does not expose (persisting-L2 control)."""

from __future__ import annotations

import ctypes
from functools import lru_cache


@lru_cache(maxsize=1)
def libcudart() -> ctypes.CDLL:
    """The CUDA runtime this process already uses (mapped by torch: same runtime, same context),
    else one on the library path. Cached: callers sit on the per-call path."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "libcudart.so" in path:
                    return ctypes.CDLL(path)
    except OSError:
        pass
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("libcudart not found in this process or on the library path")
