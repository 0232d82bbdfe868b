"""PyTorch's torch._scaled_mm (cuBLASLt FP8 GEMM with per-tensor scales, bf16 out): a library baseline."""

import torch

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version


def run(a, scale_a, b, scale_b):
    return torch._scaled_mm(a, b.t(), scale_a=scale_a.reshape(()), scale_b=scale_b.reshape(()),
                            out_dtype=torch.bfloat16)
