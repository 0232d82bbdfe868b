"""PyTorch's scaled_dot_product_attention, flash backend only (one query per sequence, GQA, head_dim 256), then
the sigmoid output gate: a library baseline."""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version


def run(q, k_cache, v_cache, gate):
    # q [B, HQ, D] -> [B, HQ, 1, D]; caches [B, L, HKV, D] -> [B, HKV, L, D] views
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                             enable_gqa=True)
    return out.squeeze(2) * torch.sigmoid(gate)
