"""FlashInfer's RMSNorm (flashinfer.norm.rmsnorm), as a library baseline. Needs flashinfer (skipped when absent)."""

import torch
from flashinfer.norm import rmsnorm

BASELINE = "flashinfer-python"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["flashinfer"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # x [T, H] is FlashInfer's 2-D input; it returns a new tensor (x * rsqrt(mean(x^2) + eps) * weight, fp32 math)
    return rmsnorm(x, weight, eps=float(eps))
