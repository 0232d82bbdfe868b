"""Straightforward PyTorch (as HF's sdpa path): repeat the KV heads, SDPA with one query position."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache.transpose(1, 2).repeat_interleave(group, dim=1)
    v = v_cache.transpose(1, 2).repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v).squeeze(2)
