"""Honest control: an autotuning cache (the best of two variants, chosen once per shape by timing
them, kept in a dict keyed on shape and dtype). Caching configurations is allowed; caching results
is not. Must pass."""

import time

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged"
DEVICE = "any"


def _fused(attn, weight, residual):
    return torch.addmm(residual, attn, weight.t())


def _upcast(attn, weight, residual):
    return (attn.float() @ weight.float().t() + residual.float()).to(attn.dtype)


_best: dict[tuple, object] = {}


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    key = (tuple(attn.shape), attn.dtype, attn.device.type)
    if key not in _best:
        times = {}
        for variant in (_fused, _upcast):
            t0 = time.perf_counter()
            for _ in range(3):
                variant(attn, weight, residual)
            times[variant] = time.perf_counter() - t0
        _best[key] = min(times, key=times.get)
    return _best[key](attn, weight, residual)
