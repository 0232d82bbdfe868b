"""Honest control: several kernels per call (upcast, GEMM, add, downcast). Must pass."""

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    proj = attn.float() @ weight.float().t()
    return (proj + residual.float()).to(attn.dtype)
