"""quack's RMSNorm (CuTe DSL), as a library baseline. Needs quack (quack-kernels; skipped when absent)."""

import torch
from quack import rmsnorm

BASELINE = "quack-kernels"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["quack"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # quack normalises in float32, multiplies by the float32 weight and rounds once to x's dtype: LlamaRMSNorm's
    # arithmetic. eps by keyword: bias, residual and out_dtype stand before it in quack's signature.
    return rmsnorm(x, weight, eps=eps)
