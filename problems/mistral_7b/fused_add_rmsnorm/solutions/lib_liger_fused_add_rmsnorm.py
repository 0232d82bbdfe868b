"""Liger-Kernel's fused residual add + RMSNorm (Triton), as a library baseline. Needs liger_kernel (skipped when absent).

LigerFusedAddRMSNormFunction.apply(X, R, W, eps, offset, casting_mode, in_place) (liger_kernel 0.8.5)
returns (rmsnorm(X + R) * W, X + R), both new tensors in X's dtype: this problem's (out, residual_out).
Offset 0 and Llama casting (MistralRMSNorm is Llama's: the inverse RMS in float32, the weight after the cast back).
"""

import torch
from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    out, summed = LigerFusedAddRMSNormFunction.apply(x, residual, weight, eps, 0.0, "llama", False)
    return out, summed
