"""Honest control: splits the rows over a thread pool created at import and waits for every part
before returning. Idle pool threads are not work left running. Must pass."""

from concurrent.futures import ThreadPoolExecutor

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged"
DEVICE = "cpu"

_pool = ThreadPoolExecutor(max_workers=2)


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(residual)
    half = (residual.shape[0] + 1) // 2
    parts = [(slice(0, half)), (slice(half, residual.shape[0]))]
    jobs = [_pool.submit(torch.addmm, residual[p], attn[p], weight.t(), out=out[p]) for p in parts]
    for job in jobs:
        job.result()
    return out
