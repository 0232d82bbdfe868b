"""Truncates the shared-memory files its requests arrive in, to crash the parent.

The parent writes every large request into one file per worker, reused (``wire.SendArena``), and
keeps it mapped: a file truncated under a mapping makes the next write into it a SIGBUS, which would
kill the parent and the whole run. This candidate keeps every memfd the worker is sent (the worker's
``os.close`` wrapped to skip them) and tries to shrink each one to nothing at every call, then
answers honestly. The parent's file is sealed against shrinking and growing (``F_SEAL_SHRINK``,
``F_SEAL_GROW``): every truncation is refused and the run goes on.
"""

import os
import sys

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "the parent's reused request file is sealed against shrinking and growing (solbench.worker.wire.SendArena)"
DEVICE = "cpu"
WORKLOAD = "t1024"  # each round's inputs (1.1 MiB) travel by the shared file: a truncation meets the next round

_kept: set[int] = set()
_close = os.close


def _is_memfd(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:")
    except OSError:
        return False


def _keep_memfds(fd: int) -> None:
    if _is_memfd(fd):
        _kept.add(fd)  # the worker thinks it closed it
        return
    _close(fd)


os.close = _keep_memfds


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    for fd in list(_kept):
        try:
            os.ftruncate(fd, 0)
            print(f"truncated memfd {fd}", file=sys.stderr, flush=True)
        except OSError as err:
            print(f"truncation of memfd {fd} refused: {err.strerror}", file=sys.stderr, flush=True)
    return torch.addmm(residual, attn, weight.t())
