"""Liger-Kernel's GEGLU (tanh-approximated GELU of the gate times up, Triton), as a library baseline. Needs
liger_kernel (skipped when absent).

LigerGELUMulFunction.apply(a, b) (liger_kernel 0.8.5) takes gate and up as two tensors of one row stride: it
makes both contiguous first (its ensure_contiguous), so the two halves of this problem's [gate | up] rows are
copied before the kernel, a cost counted in its time (Liger has no fused gate-up variant of GEGLU).
"""

import torch
from liger_kernel.ops.geglu import LigerGELUMulFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return LigerGELUMulFunction.apply(gate, up)
