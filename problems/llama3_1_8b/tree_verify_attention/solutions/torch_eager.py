"""Eager PyTorch: per sequence, gather the prefix pages, append the draft keys, SDPA with the tree as a
boolean mask (GQA)."""

import torch
import torch.nn.functional as F


def run(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale):
    ps, n = k_cache.shape[1], q.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    out = torch.empty_like(q)
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        k = torch.cat([k_cache[idx].flatten(0, 1)[:length], k_draft[b]]).transpose(0, 1)  # [HKV, L+N, D]
        v = torch.cat([v_cache[idx].flatten(0, 1)[:length], v_draft[b]]).transpose(0, 1)
        mask = torch.cat([tree_mask.new_ones(n, length), tree_mask[b]], dim=1)
        out[b] = F.scaled_dot_product_attention(q[b].transpose(0, 1), k, v, attn_mask=mask, scale=sm_scale,
                                                enable_gqa=True).transpose(0, 1)
    return out
