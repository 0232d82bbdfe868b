"""Triton RoPE (HF rotate_half convention) for q and k in one launch.

One program per token handles all query and key heads: the token's cos/sin rows are read once
and shared by every head, each head is read as its two halves (x1 = x[:D/2], x2 = x[D/2:]) so
rotate_half needs no shuffle, and the math runs in fp32 with one rounding per output:
    out[:D/2] = x1 * cos[:D/2] - x2 * sin[:D/2],   out[D/2:] = x2 * cos[D/2:] + x1 * sin[D/2:]
q and k are each read once and written once: the problem's byte count.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

WARP_CONFIGS = [triton.Config({}, num_warps=w) for w in (2, 4, 8)]


@triton.jit
def _rotate_heads(x_ptr, out_ptr, stride_h, stride_oh, n_heads, half, c1, c2, s1, s2,
                  BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)[:, None]
    dims = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (heads < n_heads) & (dims < half)
    x1 = tl.load(x_ptr + heads * stride_h + dims, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + heads * stride_h + half + dims, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * c1 - x2 * s1
    o2 = x2 * c2 + x1 * s2
    tl.store(out_ptr + heads * stride_oh + dims, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + heads * stride_oh + half + dims, o2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr, n_tokens, n_q_heads, n_k_heads, half,
                stride_qt, stride_qh, stride_kt, stride_kh, stride_cos, stride_sin,
                stride_qot, stride_qoh, stride_kot, stride_koh,
                BLOCK_QH: tl.constexpr, BLOCK_KH: tl.constexpr, BLOCK_HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    dims = tl.arange(0, BLOCK_HALF)
    dmask = dims < half
    c1 = tl.load(cos_ptr + t * stride_cos + dims, mask=dmask, other=0.0).to(tl.float32)[None, :]
    c2 = tl.load(cos_ptr + t * stride_cos + half + dims, mask=dmask, other=0.0).to(tl.float32)[None, :]
    s1 = tl.load(sin_ptr + t * stride_sin + dims, mask=dmask, other=0.0).to(tl.float32)[None, :]
    s2 = tl.load(sin_ptr + t * stride_sin + half + dims, mask=dmask, other=0.0).to(tl.float32)[None, :]
    _rotate_heads(q_ptr + t * stride_qt, q_out_ptr + t * stride_qot, stride_qh, stride_qoh, n_q_heads, half,
                  c1, c2, s1, s2, BLOCK_QH, BLOCK_HALF)
    _rotate_heads(k_ptr + t * stride_kt, k_out_ptr + t * stride_kot, stride_kh, stride_koh, n_k_heads, half,
                  c1, c2, s1, s2, BLOCK_KH, BLOCK_HALF)


def _quick_bench(kernel_call, quantiles):
    """Autotuning timer: 25 ms of reps ranks a handful of configs; the default 100 ms only slows tuning."""
    from triton.testing import do_bench

    return do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


_tuned_kernel = triton.autotune(do_bench=_quick_bench, configs=WARP_CONFIGS,
                                key=["n_q_heads", "n_k_heads", "half", "n_tokens"])(rope_kernel)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
         num_warps: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, HQ, D], k [T, HKV, D], cos/sin [T, D] -> rotated (q, k). ``num_warps`` skips autotuning."""
    if q.stride(-1) != 1 or k.stride(-1) != 1:
        q, k = q.contiguous(), k.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    n_tokens, n_q_heads, head_dim = q.shape
    n_k_heads = k.shape[1]
    if head_dim % 2 or k.shape[2] != head_dim or cos.shape != (n_tokens, head_dim) or sin.shape != cos.shape:
        raise ValueError(f"shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"cos {tuple(cos.shape)}, sin {tuple(sin.shape)}")
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    half = head_dim // 2
    kernel = _tuned_kernel if num_warps is None else rope_kernel
    launch = {} if num_warps is None else {"num_warps": num_warps}
    kernel[(n_tokens,)](
        q, k, cos, sin, q_out, k_out, n_tokens, n_q_heads, n_k_heads, half,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos.stride(0), sin.stride(0),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        BLOCK_QH=triton.next_power_of_2(n_q_heads), BLOCK_KH=triton.next_power_of_2(n_k_heads),
        BLOCK_HALF=triton.next_power_of_2(half), **launch,
    )
    return q_out, k_out


def run(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return rope(q, k, cos, sin)
