"""Triton RMSNorm: one program per row, the whole row in registers, one pass over memory.

x is read once (streamed, evict-first), the weight stays in L2 (evict-last), the sum of squares
and the scaling run in fp32, and the bf16 result is written once: the minimum traffic that the
problem's byte count assumes. The number of warps per row is autotuned per (T, H).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

WARP_CONFIGS = [triton.Config({}, num_warps=w) for w in (4, 8, 16)]


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=WARP_CONFIGS, key=["n_rows", "n_cols"])(rmsnorm_kernel)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float, num_warps: int | None = None) -> torch.Tensor:
    """RMSNorm over the last dim. ``num_warps`` fixes the launch instead of autotuning it."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    x2 = x.reshape(-1, x.shape[-1])
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(n_cols)
    args = (x2, weight.contiguous(), out, n_rows, n_cols, x2.stride(0), out.stride(0), float(eps))
    if num_warps is None:
        _tuned_kernel[(n_rows,)](*args, BLOCK=block)
    else:
        rmsnorm_kernel[(n_rows,)](*args, BLOCK=block, num_warps=num_warps)
    return out.view(x.shape)


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rmsnorm(x, weight, eps)
