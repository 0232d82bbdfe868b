"""Eager PyTorch: gather each sequence's pages, then SDPA with GQA (one call per sequence)."""

import torch
import torch.nn.functional as F


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    ps = k_cache.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    out = torch.empty_like(q)
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        k = k_cache[idx].flatten(0, 1)[:length].transpose(0, 1)  # [HKV, L, D]
        v = v_cache[idx].flatten(0, 1)[:length].transpose(0, 1)
        out[b] = F.scaled_dot_product_attention(q[b, :, None], k, v, scale=sm_scale, enable_gqa=True)[:, 0]
    return out
