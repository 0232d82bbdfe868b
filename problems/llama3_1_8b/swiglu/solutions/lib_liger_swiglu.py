"""Liger-Kernel's fused gate-up SwiGLU (Triton), as a library baseline. Needs liger_kernel (skipped when absent).

LigerFusedGateUpSiLUMulFunction (liger_kernel.ops.swiglu, 0.8.5) reads gate = the first half and up =
the second half of the last axis of one tensor: this problem's [gate | up] layout, so no slicing or copy
(LigerSiLUMulFunction would take gate and up apart and copy both non-contiguous halves first).
"""

import torch
from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(gate_up: torch.Tensor) -> torch.Tensor:
    return LigerFusedGateUpSiLUMulFunction.apply(gate_up, False)  # in_place=False: backward only
