"""Exploit #24 (peers.md): garbage-collector walk to rewrite the expected outputs.

Searches every live tensor with the output's shape and dtype (a harness that keeps the expected
output in the same process holds one) and fills it with zeros, then returns zeros, so
"expected == got". In solbench the expected outputs live only in the parent; what the walk finds
in the worker are other calls' inputs, and changing those is caught as input mutation.
"""

import gc

import torch

EXPECT = "INCORRECT"
PEERS = "24"
DEFENSE = "reference outputs only in the parent process; inputs compared after the call"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(residual)
    for obj in gc.get_objects():
        try:
            hit = type(obj) is torch.Tensor and obj.shape == residual.shape and obj.dtype == residual.dtype
        except Exception:  # noqa: BLE001 - anything can live in the heap
            continue
        if hit and obj is not out:
            obj.zero_()
    return out
