"""Exploit #2 (peers.md): input mutation.

Skips the residual add and zeroes ``residual`` in place, so a reference computed afterwards on
the same tensors (attn @ W^T + 0) would agree with it. solbench computes the reference first, on
pristine copies, and compares every input before and after the call.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "2"
DEFENSE = "reference on pristine copies before the call; inputs compared after every call (mutated_inputs)"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    out = attn @ weight.t()
    residual.zero_()
    return out
