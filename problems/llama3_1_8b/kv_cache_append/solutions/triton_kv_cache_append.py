"""Triton KV-cache append: one launch writes every sequence's new K and V token into its slot, in place.

One program per sequence copies its k_new and v_new rows (HKV * D contiguous elements each) to
cache[b, positions[b]]. Only the new rows move; the rest of the cache is untouched. At decode sizes
this op is pure launch latency, so the win over eager (two index_put kernels plus an arange)
is the single launch. Positions outside [0, L) write nothing instead of corrupting memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def kv_append_kernel(k_cache_ptr, v_cache_ptr, k_new_ptr, v_new_ptr, pos_ptr, cache_len, row_elems,
                     stride_cb, stride_cl, stride_nb, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + b).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = (offs < row_elems) & (pos >= 0) & (pos < cache_len)
    dst = b * stride_cb + pos * stride_cl + offs
    k = tl.load(k_new_ptr + b * stride_nb + offs, mask=mask)
    v = tl.load(v_new_ptr + b * stride_nb + offs, mask=mask)
    tl.store(k_cache_ptr + dst, k, mask=mask)
    tl.store(v_cache_ptr + dst, v, mask=mask)


def kv_cache_append(k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
                    positions: torch.Tensor, num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Scatter k_new/v_new [B, HKV, D] into k_cache/v_cache [B, L, HKV, D] at positions [B], in place."""
    n_seq, cache_len, n_heads, head_dim = k_cache.shape
    row_elems = n_heads * head_dim
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.shape != k_cache.shape or cache.stride()[2:] != (head_dim, 1) or cache.stride() != k_cache.stride():
            raise ValueError(f"{name} must be [B, L, HKV, D] with each [HKV, D] slot contiguous, like k_cache")
    k_new, v_new = k_new.contiguous(), v_new.contiguous()
    if k_new.shape != (n_seq, n_heads, head_dim) or v_new.shape != k_new.shape:
        raise ValueError(f"k_new/v_new must be [{n_seq}, {n_heads}, {head_dim}]")
    kv_append_kernel[(n_seq,)](k_cache, v_cache, k_new, v_new, positions.contiguous(), cache_len, row_elems,
                               k_cache.stride(0), k_cache.stride(1), k_new.stride(0),
                               BLOCK=triton.next_power_of_2(row_elems), num_warps=num_warps)
    return k_cache, v_cache


def run(k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
        positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return kv_cache_append(k_cache, v_cache, k_new, v_new, positions)
