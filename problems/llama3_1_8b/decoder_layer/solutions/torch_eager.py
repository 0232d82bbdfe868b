"""The layer as Hugging Face's LlamaDecoderLayer runs it in eager mode: one PyTorch op after another.

RMSNorm in float32, one fused q/k/v matmul, rotate_half RoPE, the K/V write into the caches' last S
slots, scaled_dot_product_attention (causal at prefill, over the whole cache at decode), o_proj and the
residual add, SiLU(gate) * up, down_proj and the residual add.
"""

import torch
import torch.nn.functional as F


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def run(x, ln1_weight, w_qkv, w_o, ln2_weight, w_gate_up, w_down, cos, sin, k_cache, v_cache, eps):
    b, s, _ = x.shape
    hkv, d = k_cache.shape[2], k_cache.shape[3]
    hq = w_o.shape[1] // d
    qkv = F.linear(_rms_norm(x, ln1_weight, eps), w_qkv)
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    q, k, v = q.view(b, s, hq, d), k.view(b, s, hkv, d), v.view(b, s, hkv, d)
    cos4, sin4 = cos[None, :, None, :], sin[None, :, None, :]
    q = q * cos4 + _rotate_half(q) * sin4
    k = k * cos4 + _rotate_half(k) * sin4
    length = k_cache.shape[1]
    k_cache[:, length - s:] = k
    v_cache[:, length - s:] = v
    attn = F.scaled_dot_product_attention(q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                          is_causal=s > 1, enable_gqa=True)
    hidden = x + F.linear(attn.transpose(1, 2).reshape(b, s, hq * d), w_o)
    gate, up = F.linear(_rms_norm(hidden, ln2_weight, eps), w_gate_up).chunk(2, dim=-1)
    out = hidden + F.linear(F.silu(gate) * up, w_down)
    return out, k_cache, v_cache
