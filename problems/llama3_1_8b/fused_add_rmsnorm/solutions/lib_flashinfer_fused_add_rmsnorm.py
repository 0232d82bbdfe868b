"""FlashInfer's fused residual add + RMSNorm (flashinfer.norm.fused_add_rmsnorm), as a library baseline. Needs flashinfer (skipped when absent).

FlashInfer's call works in place: residual becomes x + residual (rounded to bfloat16) and x becomes the
normed sum times weight; it returns nothing. This problem declares neither input written (no inplace_of),
so both are cloned first and the clones are returned as (out, residual_out); the two copies are part of
this baseline's time. FlashInfer normalises the float32 sum before its rounding, the problem the rounded
sum: they differ by under a bfloat16 step, inside the tolerance.
"""

import torch
from flashinfer.norm import fused_add_rmsnorm

BASELINE = "flashinfer-python"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["flashinfer"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    out, summed = x.clone(), residual.clone()
    fused_add_rmsnorm(out, summed, weight, eps=float(eps))
    return out, summed
