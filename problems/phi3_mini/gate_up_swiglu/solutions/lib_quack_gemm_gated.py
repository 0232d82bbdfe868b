"""quack's gemm_gated (CuTe DSL), out = silu(x @ gate^T) * (x @ up^T), as a library baseline.

Needs quack (quack-kernels; skipped when absent). The weight is [gate; up] (gate rows first): quack's
concat_layout=("B",) takes B = weight.mT as two halves along N and pairs gate column j with up column j in its tiles
(without it quack reads gate and up interleaved, column by column). That pairing runs along B's non-contiguous dim,
so B must be k-major: the weight row-major, as _tma_ready leaves it. "swiglu" is silu(gate) * up on the float32
accumulators, rounded once; store_preact=False writes only the [T, F] result. concat_layout is in quack-kernels
0.6.5, not 0.3.0.
"""

import torch
from quack.gemm_interface import gemm_gated

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
    _, out = gemm_gated(_tma_ready(x), _tma_ready(weight).mT, activation="swiglu", store_preact=False,
                        concat_layout=("B",))
    return out
