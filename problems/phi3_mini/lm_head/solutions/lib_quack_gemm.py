"""quack's GEMM (CuTe DSL), logits = x @ weight^T, as a library baseline.

Needs quack (quack-kernels; skipped when absent). quack.gemm_interface's B is (K, N): weight.mT, a view with K
contiguous (the k-major B quack's own Linear passes as weight.T); no copy. It accumulates in float32 and rounds once
to A's dtype, bfloat16 (quack's default out_dtype): the reference's arithmetic.
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


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return gemm(_tma_ready(x), _tma_ready(weight).mT)
