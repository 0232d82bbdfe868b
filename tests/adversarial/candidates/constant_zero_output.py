"""Exploit #3 (peers.md): trivial constant output.

Returns zeros, which passes a loose absolute tolerance when the true output is small. Here the
output is O(1) and an all-zero output against a non-zero reference never passes.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "3"
DEFENSE = "relative tolerance; all-zero output vs non-zero reference always fails"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(residual)
