"""PyTorch's scaled_dot_product_attention, efficient backend only (one query per sequence, GQA): a library
baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # read by solbench (never imported): skipped where the backend cannot run


def run(q, k_cache, v_cache):
    # q [B, HQ, D] -> [B, HQ, 1, D]; caches [B, L, HKV, D] -> [B, HKV, L, D] views. The backend takes
    # no GQA (enable_gqa: "No available kernel" on the H200): the KV heads are repeated, a copy counted
    # in its time.
    group = q.shape[1] // k_cache.shape[2]
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache.transpose(1, 2).repeat_interleave(group, dim=1),
                                             v_cache.transpose(1, 2).repeat_interleave(group, dim=1))
    return out.squeeze(2)
