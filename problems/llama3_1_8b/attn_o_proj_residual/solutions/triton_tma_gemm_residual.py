"""Triton persistent TMA GEMM with the residual add fused into its epilogue (Hopper and newer).

out = attn @ weight^T + residual. One CTA per SM walks the output tiles in grouped order; A and
W tiles arrive through TMA descriptors (built on the device, so every autotuned tile shape gets its
own), `tl.dot` lowers to wgmma, and the epilogue loads the residual tile through TMA, adds it in
fp32 and stores once: the projection never goes back to memory. The epilogue can be split in two
halves along N to free shared memory for one more pipeline stage.

Needs TMA (compute capability >= 9.0) and 16-byte aligned rows (K and N multiples of 8 for bf16).
The pointer-based sibling `triton_gemm_residual.py` has no such requirement.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, subtile: bool = False) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "EPILOGUE_SUBTILE": subtile,
                          "EPI_N": bn // 2 if subtile else bn},
                         num_warps=warps, num_stages=stages)


SMALL_M_CONFIGS = [  # M <= 64: weight streaming, >= 64 tiles over N at N=4096
    _cfg(64, 32, 256, 4, 4), _cfg(64, 64, 256, 4, 3), _cfg(64, 32, 128, 4, 6), _cfg(64, 64, 128, 4, 5),
]
MID_M_CONFIGS = [  # 64 < M <= 2048
    _cfg(128, 128, 64, 8, 4), _cfg(128, 256, 64, 8, 3, True), _cfg(64, 128, 64, 4, 4), _cfg(128, 64, 64, 4, 4),
]
LARGE_M_CONFIGS = [
    _cfg(128, 256, 64, 8, 3), _cfg(128, 256, 64, 8, 3, True), _cfg(128, 256, 64, 8, 4, True), _cfg(256, 128, 64, 8, 3),
    _cfg(128, 128, 64, 8, 4), _cfg(128, 128, 128, 8, 3),
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
def tma_gemm_residual_kernel(
    a_ptr, w_ptr, r_ptr, c_ptr,  # A [M, K], W [N, K], residual and C [M, N]; contiguous
    M, N, K,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, EPI_N: tl.constexpr,  # EPI_N = BLOCK_N // 2 when subtiled, else BLOCK_N
):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    r_desc = tl.make_tensor_descriptor(r_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPI_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, EPI_N])

    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    # A separate epilogue tile counter keeps the prologue and epilogue independent, which the
    # pipeliner needs to overlap one tile's epilogue with the next tile's loads.
    tile_id_c = start_pid - NUM_SMS

    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kb in range(k_tiles):
            a = a_desc.load([offs_m, kb * BLOCK_K])  # TMA zero-fills past M and K
            w = w_desc.load([offs_n, kb * BLOCK_K])
            acc = tl.dot(a, w.T, acc)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, EPI_N)), (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            r0 = r_desc.load([offs_cm, offs_cn]).to(tl.float32)
            c_desc.store([offs_cm, offs_cn], (acc0 + r0).to(c_ptr.dtype.element_ty))
            r1 = r_desc.load([offs_cm, offs_cn + EPI_N]).to(tl.float32)
            c_desc.store([offs_cm, offs_cn + EPI_N], (acc1 + r1).to(c_ptr.dtype.element_ty))
        else:
            res = r_desc.load([offs_cm, offs_cn]).to(tl.float32)
            c_desc.store([offs_cm, offs_cn], (acc + res).to(c_ptr.dtype.element_ty))  # TMA clips past M, N


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=ALL_CONFIGS, key=["M", "N", "K"],
                                prune_configs_by={"early_config_prune": _prune})(tma_gemm_residual_kernel)


def _alloc_descriptor_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # Device-side TMA descriptors live in a global scratch buffer that Triton asks for.
    return torch.empty(size, device="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.int8)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter runs: a few "SMs" so the persistent loop takes several tiles each


def tma_gemm_residual(a: torch.Tensor, w: torch.Tensor, residual: torch.Tensor,
                      config: dict | None = None) -> torch.Tensor:
    """a [M, K] @ w[N, K]^T + residual [M, N]. ``config`` (the kernel's constexprs) skips autotuning."""
    a, w, residual = a.contiguous(), w.contiguous(), residual.contiguous()
    m, k = a.shape
    n = w.shape[0]
    if w.shape[1] != k or residual.shape != (m, n):
        raise ValueError(f"shape mismatch: a {tuple(a.shape)}, w {tuple(w.shape)}, residual {tuple(residual.shape)}")
    if (k * a.element_size()) % 16 or (n * residual.element_size()) % 16:
        raise ValueError(f"TMA needs 16-byte aligned rows; got K={k}, N={n}")
    out = torch.empty((m, n), device=a.device, dtype=residual.dtype)
    triton.set_allocator(_alloc_descriptor_scratch)
    num_sms = _num_sms(a.device)

    def grid(meta: dict) -> tuple[int]:
        return (min(num_sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)

    if config is None:
        _tuned_kernel[grid](a, w, residual, out, m, n, k, NUM_SMS=num_sms)
    else:
        tma_gemm_residual_kernel[grid](a, w, residual, out, m, n, k, NUM_SMS=num_sms, **config)
    return out


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return tma_gemm_residual(attn, weight, residual)
