"""Device-side guards: poisoned free memory, the persisting-L2 carve-out.

Everything CUDA is imported or loaded inside the functions, so CPU installs never touch it.
"""

from __future__ import annotations

import ctypes
from typing import Any

from solbench.guards.findings import REWARD_HACK, Finding
from solbench.timing import libcudart

POISON_BYTE = 0xFF  # all-ones: NaN in float16/bfloat16/float32/float64/float8, -1 in integers
_CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
_SMALL_BLOCK = 1 << 20  # the caching allocator's small/large pool boundary


def poison_free_memory(device: Any, nbytes: int) -> int:
    """Fill memory the allocator will hand out next with NaN bytes; returns the bytes written.

    CUDA: every free block cached by PyTorch's allocator is allocated at its exact size (so the
    best fit is that block), filled, and released, plus one fresh block of ``nbytes``: a
    ``torch.empty`` in the next call then holds NaN, never a stale result. CPU: one block of
    ``nbytes`` is filled and freed, which malloc usually hands back for the next allocation of
    that size (best effort: the C library decides).
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return _poison_cuda(dev, nbytes)
    if nbytes <= 0:
        return 0
    buf = torch.empty(nbytes, dtype=torch.uint8)
    buf.fill_(POISON_BYTE)
    del buf
    return nbytes


def _free_block_sizes(dev: Any) -> list[int]:
    import torch

    index = dev.index if dev.index is not None else torch.cuda.current_device()
    sizes = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", index) != index:
            continue
        small_pool = seg.get("segment_type") == "small"
        for blk in seg.get("blocks", []):
            # A remainder under 1 MiB in the large pool is never handed to a request of its size
            # (those go to the small pool), so it cannot be reached and is left alone.
            if blk.get("state") == "inactive" and (small_pool or blk["size"] > _SMALL_BLOCK):
                sizes.append(int(blk["size"]))
    return sorted(sizes, reverse=True)


def _poison_cuda(dev: Any, nbytes: int) -> int:
    import torch

    with torch.cuda.device(dev):
        torch.cuda.synchronize()
        held = []
        total = 0
        for size in [*_free_block_sizes(dev), max(int(nbytes), 0)]:
            if size <= 0:
                continue
            buf = torch.empty(size, dtype=torch.uint8, device=dev)
            buf.fill_(POISON_BYTE)
            held.append(buf)
            total += size
        torch.cuda.synchronize()
        del held
    return total


def reset_persisting_l2() -> bool:
    """Demote every persisting L2 line and set the persisting carve-out to 0. True if both worked.

    ``cudaCtxResetPersistingL2Cache`` makes lines pinned by an access-policy window normal again,
    so the next L2 flush evicts them; a zero ``cudaLimitPersistingL2CacheSize`` stops new pins.
    """
    try:
        import torch

        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return False
        lib = libcudart()
        lib.cudaCtxResetPersistingL2Cache.restype = ctypes.c_int
        lib.cudaDeviceSetLimit.restype = ctypes.c_int
        lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        rc_reset = lib.cudaCtxResetPersistingL2Cache()
        rc_limit = lib.cudaDeviceSetLimit(_CUDA_LIMIT_PERSISTING_L2, 0)
        # The driver may round "0" up to its granularity: what it reports now is the clean level.
        global _L2_BASELINE
        _L2_BASELINE = max(_L2_BASELINE or 0, persisting_l2_limit() or 0)
        return rc_reset == 0 and rc_limit == 0
    except (OSError, AttributeError):
        return False


_L2_BASELINE: int | None = None


def persisting_l2_limit() -> int | None:
    """The current persisting-L2 carve-out in bytes, or None where it cannot be read (no CUDA)."""
    try:
        import torch

        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None
        lib = libcudart()
        lib.cudaDeviceGetLimit.restype = ctypes.c_int
        lib.cudaDeviceGetLimit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        value = ctypes.c_size_t(0)
        if lib.cudaDeviceGetLimit(ctypes.byref(value), _CUDA_LIMIT_PERSISTING_L2) != 0:
            return None
        return int(value.value)
    except (OSError, AttributeError):
        return None


def note_persisting_l2_baseline() -> int | None:
    """The device's persisting-L2 limit before any candidate code ran (not 0 on every machine: the
    H200 here reported 11796480 bytes with nothing set), so only an increase is a finding."""
    global _L2_BASELINE
    _L2_BASELINE = persisting_l2_limit()
    return _L2_BASELINE


def check_persisting_l2() -> Finding | None:
    """REWARD_HACK when the call left a persisting-L2 carve-out (pinned lines survive the L2 flush)."""
    limit = persisting_l2_limit()
    if limit and limit > (_L2_BASELINE or 0):
        return Finding("persisting_l2", REWARD_HACK,
                       f"run() reserved {limit} bytes of persisting L2 (cudaLimitPersistingL2CacheSize); lines pinned "
                       "there survive the benchmark's L2 flush, so later calls read them from cache")
    return None
