"""Liger-Kernel's RMSNorm (Triton), as a library baseline. Needs liger_kernel (skipped when absent)."""

import torch
from liger_kernel.ops.rms_norm import LigerRMSNormFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # offset 0 and Llama casting (fp32 math, weight applied after the cast back): Qwen3MoeRMSNorm is Llama's
    return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama", False)
