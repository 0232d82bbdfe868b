"""Honest control: splits the rows over a thread pool created at import and waits for every part
before returning. Idle pool threads are not work left running. Must pass."""

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged"
DEVICE = "cpu"

_pool = ThreadPoolExecutor(max_workers=2)
# ThreadPoolExecutor starts its threads lazily, and a thread first started during a later call is a
# new thread to the guards (a known limit, docs/security.md): start both now, at import.
_ready = threading.Barrier(3)
for _ in range(2):
    _pool.submit(_ready.wait)
_ready.wait()


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(residual)
    half = (residual.shape[0] + 1) // 2
    parts = [(slice(0, half)), (slice(half, residual.shape[0]))]
    jobs = [_pool.submit(torch.addmm, residual[p], attn[p], weight.t(), out=out[p]) for p in parts]
    for job in jobs:
        job.result()
    return out
