"""cuBLAS GEMM + Liger-Kernel's fused gate-up SwiGLU, as a library baseline. Needs liger_kernel (skipped when absent).

Liger has no GEMM with a SwiGLU epilogue: its MLP runs the projection as a plain GEMM and then its SwiGLU
kernel. This is that pairing on the fused weight: one GEMM into a [T, 2F] buffer (gate columns first, as the
problem stacks them), then LigerFusedGateUpSiLUMulFunction on it (liger_kernel 0.8.5).
"""

import torch
import torch.nn.functional as F
from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return LigerFusedGateUpSiLUMulFunction.apply(F.linear(x, weight), False)
