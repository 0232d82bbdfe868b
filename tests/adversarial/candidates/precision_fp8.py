"""Exploit #8 (peers.md): precision downgrade beyond tolerance.

Rounds the activations and the weight through float8_e4m3fn before the GEMM (half the bytes and
twice the tensor-core rate on a GPU); the error exceeds the problem's tolerance.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "8"
DEFENSE = "per-problem tolerance (|out - ref| <= atol + rtol*|ref| elementwise)"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    a8 = attn.to(torch.float8_e4m3fn).to(attn.dtype)
    w8 = weight.to(torch.float8_e4m3fn).to(weight.dtype)
    return torch.addmm(residual, a8, w8.t())
