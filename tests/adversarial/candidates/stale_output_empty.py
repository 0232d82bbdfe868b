"""Exploit #1 (peers.md): stale-output reuse.

Computes nothing: returns ``torch.empty``, hoping the allocator hands back memory that still holds
a correct result (in harnesses that compute the reference in the same process just before).
solbench computes references in the parent, gives every round fresh inputs and poisons free GPU
memory, so the bytes are never the answer.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "1"
DEFENSE = "reference in the parent process; fresh inputs per round; free memory poisoned with NaN (CUDA)"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(residual)
