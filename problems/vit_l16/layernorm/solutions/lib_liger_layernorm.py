"""Liger-Kernel's LayerNorm (Triton), as a library baseline. Needs liger_kernel (skipped when absent).

LigerLayerNormFunction.apply(X, W, B, eps) (liger_kernel 0.8.5): one row per program, mean and biased
variance in float32, the affine in float32, one rounding to X's dtype: nn.LayerNorm's arithmetic.
"""

import torch
from liger_kernel.ops.layer_norm import LigerLayerNormFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return LigerLayerNormFunction.apply(x, weight, bias, eps)
