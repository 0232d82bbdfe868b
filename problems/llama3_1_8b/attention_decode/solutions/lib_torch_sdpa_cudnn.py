"""PyTorch's scaled_dot_product_attention, cudnn backend only (one query per sequence, GQA): a library
baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # read by solbench (never imported): skipped where the backend cannot run


def run(q, k_cache, v_cache):
    # q [B, HQ, D] -> [B, HQ, 1, D]; caches [B, L, HKV, D] -> [B, HKV, L, D] views
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                             enable_gqa=True)
    return out.squeeze(2)
