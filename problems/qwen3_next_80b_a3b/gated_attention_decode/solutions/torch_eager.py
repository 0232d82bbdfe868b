"""Eager PyTorch: SDPA with GQA over the whole cache, then the sigmoid gate."""

import torch
import torch.nn.functional as F


def run(q, k_cache, v_cache, gate):
    out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                         enable_gqa=True).squeeze(2)
    return out * torch.sigmoid(gate)
