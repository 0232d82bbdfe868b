"""Straightforward PyTorch: scaled_dot_product_attention with one query position and enable_gqa."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2), enable_gqa=True
    )  # [B, HQ, 1, D]
    return out.squeeze(2)
