"""Eager PyTorch: gather each sequence's pages, then SDPA with GQA (one call per sequence)."""

import torch
import torch.nn.functional as F


def sequence_kv(k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len):
    """Each sequence's keys and values [L, HKV, D], gathered from its pages, in batch order."""
    ps = k_cache.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        yield k_cache[idx].flatten(0, 1)[:length], v_cache[idx].flatten(0, 1)[:length]


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    out = torch.empty_like(q)
    for b, (k, v) in enumerate(sequence_kv(k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len)):
        out[b] = F.scaled_dot_product_attention(q[b, :, None], k.transpose(0, 1), v.transpose(0, 1), scale=sm_scale,
                                                enable_gqa=True)[:, 0]
    return out
