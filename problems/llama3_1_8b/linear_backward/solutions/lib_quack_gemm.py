"""quack's GEMM (CuTe DSL), the two GEMMs of a linear layer's backward, as a library baseline.

Needs quack (quack-kernels; skipped when absent). grad_x = grad_out @ weight: B = weight (K = H, N = F), n-major.
grad_weight = grad_out^T @ x: A = grad_out.mT, an m-major view (quack's own Linear backward passes dout.T), B = x.
Two launches, each accumulating in float32 and rounding once to bfloat16 (A's dtype): the reference's arithmetic.
"""

import torch
from quack.gemm_interface import gemm

BASELINE = "quack-kernels"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["quack.gemm_interface"]  # read by solbench (never imported) to skip this file when it is not installed


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    # quack's TMA loads need a unit-stride last dim, the other strides and the base address in multiples of 16
    # bytes; another view (strided, broadcast, transposed) is copied, contiguous
    unit = 16 // t.element_size()
    if t.stride(-1) == 1 and all(s > 0 and s % unit == 0 for s in t.stride()[:-1]) and t.data_ptr() % 16 == 0:
        return t
    return t.clone(memory_format=torch.contiguous_format)


def run(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    grad_out = _tma_ready(grad_out)
    return gemm(grad_out, _tma_ready(weight)), gemm(grad_out.mT, _tma_ready(x))
