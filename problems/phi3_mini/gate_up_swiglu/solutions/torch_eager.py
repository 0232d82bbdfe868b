"""Straightforward PyTorch (Phi3MLP): one bfloat16 linear, chunk, up * silu(gate)."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    gate, up = F.linear(x, weight).chunk(2, dim=-1)
    return up * F.silu(gate)
