"""Straightforward PyTorch: torch._scaled_mm (cuBLASLt FP8 GEMM with per-tensor scales)."""

import torch


def run(a: torch.Tensor, scale_a: torch.Tensor, b: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    # b is [N, K] row-major, so b.t() is the column-major [K, N] operand _scaled_mm wants.
    return torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
