"""Straightforward PyTorch: causal scaled_dot_product_attention with enable_gqa (flash on the GPU)."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    )  # [B, HQ, S, D]
    return out.transpose(1, 2).contiguous()
