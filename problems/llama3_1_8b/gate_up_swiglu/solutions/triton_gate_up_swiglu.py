"""Triton gate/up GEMM with SwiGLU in its epilogue: out = silu(x @ Wg^T) * (x @ Wu^T).

Each CTA owns an output tile [BLOCK_M, BLOCK_N] of the [T, F] result and accumulates two fp32
tiles in registers: the gate from weight rows n.. and the up from rows F+n.. (the stacked
[gate; up] layout), sharing every loaded x tile between the two `tl.dot`s (wgmma on Hopper). The
epilogue applies silu(gate) * up in fp32 and stores bf16 once: the [T, 2F] projection never
touches memory, so the traffic is x, the weight and the [T, F] output.

Tiles are autotuned per (M, N, K) over small sets pruned by M (decode: thin M, narrow N and deep K
so that hundreds of CTAs stream the 235 MB weight; prefill: 128x128 output tiles, i.e. 128x256 of
GEMM work per CTA, with grouped ordering for L2 reuse of the weight).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, group_m: int = 8) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
                         num_warps=warps, num_stages=stages)


DECODE_CONFIGS = [_cfg(16, 32, 256, 4, 4), _cfg(16, 64, 128, 4, 4), _cfg(16, 32, 128, 4, 6), _cfg(16, 16, 256, 4, 5)]
SMALL_CONFIGS = [_cfg(32, 32, 256, 4, 4), _cfg(64, 32, 128, 4, 4), _cfg(64, 64, 128, 4, 3), _cfg(32, 64, 128, 4, 4)]
MID_CONFIGS = [_cfg(128, 64, 64, 4, 4), _cfg(128, 128, 64, 8, 3), _cfg(64, 128, 64, 4, 4), _cfg(128, 64, 64, 8, 4)]
LARGE_CONFIGS = [_cfg(128, 128, 64, 8, 3), _cfg(128, 128, 64, 8, 4), _cfg(128, 64, 64, 4, 4), _cfg(256, 64, 64, 8, 3)]
ALL_CONFIGS = DECODE_CONFIGS + SMALL_CONFIGS + MID_CONFIGS + LARGE_CONFIGS


def configs_for_m(m: int) -> list[triton.Config]:
    if m <= 16:
        return DECODE_CONFIGS
    if m <= 64:
        return SMALL_CONFIGS
    return MID_CONFIGS if m <= 2048 else LARGE_CONFIGS


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = configs_for_m(int(named_args["M"]))
    return [c for c in configs if any(c is w for w in wanted)]


@triton.jit
def gate_up_swiglu_kernel(
    x_ptr, w_ptr, out_ptr,  # x [M, K], w [2N, K] (gate rows then up rows), out [M, N]; row-major
    M, N, K,
    stride_xm, stride_wn, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Out-of-range rows/columns wrap (and are dropped by the masked store) so the K loop is mask-free.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    wg_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]  # [BLOCK_K, BLOCK_N] of Wg^T
    wu_ptrs = wg_ptrs + N * stride_wn  # the up rows sit N rows below their gate rows

    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs)
            wg = tl.load(wg_ptrs)
            wu = tl.load(wu_ptrs)
        else:
            k_left = K - kb * BLOCK_K
            a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            wg = tl.load(wg_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            wu = tl.load(wu_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc_g = tl.dot(a, wg, acc_g)
        acc_u = tl.dot(a, wu, acc_u)
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K
        wu_ptrs += BLOCK_K

    out = acc_g * tl.sigmoid(acc_g) * acc_u
    offs_om = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_on = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_om[:, None] < M) & (offs_on[None, :] < N)
    tl.store(out_ptr + offs_om[:, None] * stride_om + offs_on[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


_heuristic_kernel = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})(gate_up_swiglu_kernel)


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=ALL_CONFIGS, key=["M", "N", "K"],
                                prune_configs_by={"early_config_prune": _prune})(_heuristic_kernel)


def gate_up_swiglu(x: torch.Tensor, weight: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """x [M, K], weight [2N, K] -> silu(x @ weight[:N]^T) * (x @ weight[N:]^T). ``config`` skips autotuning."""
    x, weight = x.contiguous(), weight.contiguous()
    m, k = x.shape
    if weight.shape[1] != k or weight.shape[0] % 2:
        raise ValueError(f"shape mismatch: x {tuple(x.shape)}, weight {tuple(weight.shape)} (want [2F, {k}])")
    n = weight.shape[0] // 2
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    args = (x, weight, out, m, n, k, x.stride(0), weight.stride(0), out.stride(0))
    if config is None:
        _tuned_kernel[grid](*args)
    else:
        _heuristic_kernel[grid](*args, **config)
    return out


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return gate_up_swiglu(x, weight)
