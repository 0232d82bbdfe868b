"""Straightforward PyTorch: slice the window out of the cache, repeat the KV heads, SDPA."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, window: int) -> torch.Tensor:
    start = max(0, k_cache.shape[1] - window)
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)
    v = v_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v).squeeze(2)
