"""Triton persistent TMA gate/up GEMM with SwiGLU in its epilogue (Hopper and newer).

out = silu(x @ Wg^T) * (x @ Wu^T), where weight = [Wg; Wu] is stacked on its rows. There is one
CTA per SM, and it walks the [T, F] output tiles in grouped order. Each K step brings one x tile and two
weight tiles (gate rows n.., up rows F+n..) through device-side TMA descriptors and feeds two
wgmma accumulators. The epilogue computes silu(g) * u in fp32 and stores bf16 through TMA
(optionally in two halves along N, which frees registers and shared memory). The [T, 2F] projection
never touches memory.

A gate tile that runs past row F reads up rows, which is harmless: those output columns lie past
F, and the store clips them. Needs TMA (compute capability >= 9.0) and 16-byte aligned rows.
The pointer-based sibling `triton_gate_up_swiglu.py` has no such requirement.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, subtile: bool = False) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "EPILOGUE_SUBTILE": subtile,
                          "EPI_N": bn // 2 if subtile else bn}, num_warps=warps, num_stages=stages)


SMALL_M_CONFIGS = [  # M <= 64: weight streaming (235 MB); 224-448 tiles over F = 14336
    _cfg(64, 32, 256, 4, 4), _cfg(64, 64, 128, 4, 4), _cfg(64, 32, 128, 4, 6),
]
MID_M_CONFIGS = [_cfg(128, 64, 64, 4, 4), _cfg(128, 128, 64, 8, 3), _cfg(64, 128, 64, 4, 4), _cfg(128, 128, 64, 8, 4, True)]
LARGE_M_CONFIGS = [
    _cfg(128, 128, 64, 8, 3), _cfg(128, 128, 64, 8, 4), _cfg(128, 128, 64, 8, 4, True), _cfg(128, 64, 64, 4, 4),
    _cfg(256, 64, 64, 8, 3),
]
ALL_CONFIGS = SMALL_M_CONFIGS + MID_M_CONFIGS + LARGE_M_CONFIGS


def configs_for_m(m: int) -> list[triton.Config]:
    if m <= 64:
        return SMALL_M_CONFIGS
    return MID_M_CONFIGS if m <= 2048 else LARGE_M_CONFIGS


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = configs_for_m(int(named_args["M"]))
    return [c for c in configs if any(c is w for w in wanted)]


@triton.jit
def _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _swiglu(g, u):
    return g * tl.sigmoid(g) * u


@triton.jit
def tma_gate_up_swiglu_kernel(
    x_ptr, w_ptr, out_ptr,  # x [M, K], w [2N, K] (gate rows, then up rows), out [M, N]; contiguous
    M, N, K,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, EPI_N: tl.constexpr,  # EPI_N = BLOCK_N // 2 when subtiled, else BLOCK_N
):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[2 * N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    o_desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPI_N])

    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    tile_id_c = start_pid - NUM_SMS  # the epilogue's own counter keeps it independent of the prologue

    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kb in range(k_tiles):
            a = x_desc.load([offs_m, kb * BLOCK_K])
            wg = w_desc.load([offs_n, kb * BLOCK_K])
            wu = w_desc.load([N + offs_n, kb * BLOCK_K])
            acc_g = tl.dot(a, wg.T, acc_g)
            acc_u = tl.dot(a, wu.T, acc_u)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            g0, g1 = tl.split(tl.permute(tl.reshape(acc_g, (BLOCK_M, 2, EPI_N)), (0, 2, 1)))
            u0, u1 = tl.split(tl.permute(tl.reshape(acc_u, (BLOCK_M, 2, EPI_N)), (0, 2, 1)))
            o_desc.store([offs_cm, offs_cn], _swiglu(g0, u0).to(out_ptr.dtype.element_ty))
            o_desc.store([offs_cm, offs_cn + EPI_N], _swiglu(g1, u1).to(out_ptr.dtype.element_ty))
        else:
            o_desc.store([offs_cm, offs_cn], _swiglu(acc_g, acc_u).to(out_ptr.dtype.element_ty))


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=ALL_CONFIGS, key=["M", "N", "K"],
                                prune_configs_by={"early_config_prune": _prune})(tma_gate_up_swiglu_kernel)


def _alloc_descriptor_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # Device-side TMA descriptors live in a global scratch buffer that Triton asks for.
    return torch.empty(size, device="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.int8)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter runs: a few "SMs" so the persistent loop takes several tiles each


def tma_gate_up_swiglu(x: torch.Tensor, weight: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """x [M, K], weight [2N, K] -> silu(x @ weight[:N]^T) * (x @ weight[N:]^T). ``config`` skips autotuning."""
    x, weight = x.contiguous(), weight.contiguous()
    m, k = x.shape
    if weight.shape[1] != k or weight.shape[0] % 2:
        raise ValueError(f"shape mismatch: x {tuple(x.shape)}, weight {tuple(weight.shape)} (want [2F, {k}])")
    n = weight.shape[0] // 2
    if (k * x.element_size()) % 16 or (n * x.element_size()) % 16:
        raise ValueError(f"TMA needs 16-byte aligned rows; got K={k}, F={n}")
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    triton.set_allocator(_alloc_descriptor_scratch)
    num_sms = _num_sms(x.device)

    def grid(meta: dict) -> tuple[int]:
        return (min(num_sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)

    if config is None:
        _tuned_kernel[grid](x, weight, out, m, n, k, NUM_SMS=num_sms)
    else:
        tma_gate_up_swiglu_kernel[grid](x, weight, out, m, n, k, NUM_SMS=num_sms, **config)
    return out


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return tma_gate_up_swiglu(x, weight)
