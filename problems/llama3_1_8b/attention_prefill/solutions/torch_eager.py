"""Straightforward PyTorch: causal scaled_dot_product_attention with enable_gqa (flash on the GPU)."""

import torch
import torch.nn.functional as F


# .contiguous(): a strided view whose rows are not 16-byte aligned crashes or corrupts SDPA's fused
# kernels (H200, torch 2.11, the edge round "strided": flash a misaligned address, cuDNN NaN, efficient
# no kernel); a no-op for contiguous inputs.
def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    )  # [B, HQ, S, D]
    return out.transpose(1, 2).contiguous()
