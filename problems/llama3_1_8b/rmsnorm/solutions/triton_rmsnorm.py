"""Triton RMSNorm: whole rows in registers, one pass over memory, rows software-pipelined.

Each program loads the weight once and then walks rows pid, pid + P, ... (P programs in all). The
row loop is a `tl.range` with num_stages, so the next rows' loads are in flight (through shared
memory) while the current row is being reduced. A one-row-per-program kernel is latency-bound
instead: its store cannot start until the whole row is loaded and reduced, and registers cap
the number of rows in flight. Per row, x is read once (evict-first), the sum of squares and the
scaling run in fp32, and the bf16 result is written once: the minimum traffic that the problem's
byte count assumes.

Programs per SM, warps and pipeline depth are autotuned per (T, H). The plain one-row-per-program
launch (PROGS_PER_SM large, STAGES 1) is one of the candidates, so tuning can only pick
something that measured faster.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _cfg(progs_per_sm: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"PROGS_PER_SM": progs_per_sm, "STAGES": stages}, num_warps=warps)


ONE_ROW_PER_PROGRAM = 1 << 20
CONFIGS = [
    _cfg(ONE_ROW_PER_PROGRAM, 4, 1), _cfg(ONE_ROW_PER_PROGRAM, 8, 1),
    _cfg(4, 8, 2), _cfg(4, 8, 3), _cfg(8, 4, 3), _cfg(2, 16, 3), _cfg(8, 8, 2),
]


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out, eps,
                   BLOCK: tl.constexpr, STAGES: tl.constexpr, PROGS_PER_SM: tl.constexpr):
    # PROGS_PER_SM only sizes the grid (see the launcher); it is a parameter so configs can carry it.
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # Row pointers advance by whole strides (64-bit pointer arithmetic; no row * stride product).
    x_row = x_ptr + pid.to(tl.int64) * stride_x
    o_row = out_ptr + pid.to(tl.int64) * stride_out
    for _ in tl.range(pid, n_rows, n_prog, num_stages=STAGES):
        x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(o_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)
        x_row += n_prog * stride_x
        o_row += n_prog * stride_out


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=CONFIGS, key=["n_rows", "n_cols"])(rmsnorm_kernel)


def _num_sms(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float, config: dict | None = None) -> torch.Tensor:
    """RMSNorm over the last dim. ``config`` ({"PROGS_PER_SM", "STAGES", "num_warps"}) skips autotuning."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    x2 = x.reshape(-1, x.shape[-1])
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    num_sms = _num_sms(x.device)

    def grid(meta: dict) -> tuple[int]:
        return (min(n_rows, meta["PROGS_PER_SM"] * num_sms),)

    args = (x2, weight.contiguous(), out, n_rows, n_cols, x2.stride(0), out.stride(0), float(eps))
    block = triton.next_power_of_2(n_cols)
    if config is None:
        _tuned_kernel[grid](*args, BLOCK=block)
    else:
        rmsnorm_kernel[grid](*args, BLOCK=block, **config)
    return out.view(x.shape)


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rmsnorm(x, weight, eps)
