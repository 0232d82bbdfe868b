"""Honest control: torch.compile (Inductor generates and compiles C++ on the CPU, Triton on a GPU;
its caches go to the worker's own folder). Must pass."""

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged (compile caches, compile threads)"
DEVICE = "any"
SLOW = True  # compiling takes tens of seconds on a small CPU


@torch.compile(dynamic=False)
def _fused(attn, weight, residual):
    return (attn.float() @ weight.float().t() + residual.float()).to(attn.dtype)


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return _fused(attn, weight, residual)
