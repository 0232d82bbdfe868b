"""Triton GEMM with the residual add fused into its epilogue: out = x @ weight^T + residual.

The MLP down projection (K = intermediate_size = 14336, N = hidden = 4096) followed by the
residual add. The projection stays in fp32 registers and is added to the residual tile before the
single bf16 store, so it never goes back to memory. On Hopper `tl.dot` on bf16 tiles lowers to wgmma.

Tiles are chosen by `triton.autotune`, keyed on (M, N, K), over a small set pruned by M:
- decode (M <= 64): thin BLOCK_M, narrow BLOCK_N and deep BLOCK_K so that >= ~128 CTAs stream
  the 117 MB weight (the whole cost at small M) without split-K;
- prefill: 128x256x64 / 256x128x64 / 128x128x64 tiles, 3-4 stages, 8 warps, with grouped tile
  ordering so consecutive CTAs share weight columns in L2.

Self-contained on purpose (a candidate is one file): the kernel is the same as
attn_o_proj_residual's triton_gemm_residual.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, group_m: int = 8) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
                         num_warps=warps, num_stages=stages)


# (M regime) -> candidate tiles. Small sets keep autotuning to a few seconds per shape.
DECODE_CONFIGS = [  # weight-streaming: many CTAs over N, deep K, several stages in flight
    _cfg(16, 32, 256, 4, 4), _cfg(16, 64, 256, 4, 4), _cfg(16, 32, 128, 4, 6),
    _cfg(16, 64, 128, 4, 5), _cfg(16, 16, 256, 2, 6),
]
SMALL_CONFIGS = [  # 16 < M <= 64
    _cfg(32, 32, 256, 4, 4), _cfg(64, 32, 256, 4, 4), _cfg(64, 64, 128, 4, 4), _cfg(32, 64, 128, 4, 5),
]
MID_CONFIGS = [  # 64 < M <= 2048: keep >= ~1 wave of CTAs
    _cfg(128, 128, 64, 8, 4), _cfg(128, 256, 64, 8, 3), _cfg(64, 128, 64, 4, 4), _cfg(128, 64, 64, 4, 4),
]
LARGE_CONFIGS = [
    _cfg(128, 256, 64, 8, 3), _cfg(256, 128, 64, 8, 3), _cfg(128, 128, 64, 8, 4), _cfg(128, 256, 64, 8, 4),
]
ALL_CONFIGS = DECODE_CONFIGS + SMALL_CONFIGS + MID_CONFIGS + LARGE_CONFIGS


def configs_for_m(m: int) -> list[triton.Config]:
    if m <= 16:
        return DECODE_CONFIGS
    if m <= 64:
        return SMALL_CONFIGS
    if m <= 2048:
        return MID_CONFIGS
    return LARGE_CONFIGS


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = configs_for_m(int(named_args["M"]))
    return [c for c in configs if any(c is w for w in wanted)]


@triton.jit
def gemm_residual_kernel(
    a_ptr, w_ptr, r_ptr, c_ptr,  # A [M, K], W [N, K], residual and C [M, N]; all row-major
    M, N, K,
    stride_am, stride_wn, stride_rm, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    # Grouped ordering: GROUP_M row-blocks walk the N tiles together, so a weight column block
    # is reused from L2 by GROUP_M CTAs before it is evicted.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Wrap out-of-range rows instead of masking the K loop's loads: the extra rows are computed
    # and discarded by the masked store, and the hot loop stays mask-free.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_wn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + offs_wn[None, :] * stride_wn + offs_k[:, None]  # a [BLOCK_K, BLOCK_N] view of W^T

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_left = K - kb * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    # Epilogue: residual tile in, fp32 add, one rounding to the output dtype.
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    res = tl.load(r_ptr + offs_cm[:, None] * stride_rm + offs_cn[None, :], mask=mask, other=0.0)
    out = acc + res.to(tl.float32)
    tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :], out.to(c_ptr.dtype.element_ty), mask=mask)


_heuristic_kernel = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})(gemm_residual_kernel)


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=ALL_CONFIGS, key=["M", "N", "K"],
                                prune_configs_by={"early_config_prune": _prune})(_heuristic_kernel)


def gemm_residual(a: torch.Tensor, w: torch.Tensor, residual: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """a [M, K] @ w[N, K]^T + residual [M, N]. ``config`` (BLOCK_M/N/K, GROUP_M) skips autotuning."""
    a, w, residual = a.contiguous(), w.contiguous(), residual.contiguous()
    m, k = a.shape
    n = w.shape[0]
    if w.shape[1] != k or residual.shape != (m, n):
        raise ValueError(f"shape mismatch: a {tuple(a.shape)}, w {tuple(w.shape)}, residual {tuple(residual.shape)}")
    out = torch.empty((m, n), device=a.device, dtype=residual.dtype)

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    args = (a, w, residual, out, m, n, k, a.stride(0), w.stride(0), residual.stride(0), out.stride(0))
    if config is None:
        _tuned_kernel[grid](*args)
    else:
        _heuristic_kernel[grid](*args, **config)
    return out


def run(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return gemm_residual(x, weight, residual)
