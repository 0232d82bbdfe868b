"""Honest control on any device: the seed problem's GEMM + residual as one addmm. The phase
exploits that end honest must not be timed faster than 95% of it (HONEST)."""

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged (the honest baseline of the phase exploits)"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return torch.addmm(residual, attn, weight.t())
