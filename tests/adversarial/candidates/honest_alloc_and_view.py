"""Honest control: allocates inside run (a workspace twice the output's size) and returns a view of
that fresh buffer. A view of a fresh allocation is a tensor of its own. Must pass."""

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    t, h = residual.shape
    workspace = torch.empty(2 * t, h, dtype=residual.dtype, device=residual.device)
    torch.addmm(residual, attn, weight.t(), out=workspace[t:])
    return workspace[t:]
