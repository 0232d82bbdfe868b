"""Eager PyTorch: per sequence, gather the prefix pages, append the draft keys, SDPA with the tree as a
boolean mask (GQA)."""

import torch
import torch.nn.functional as F


def sequence_kv_mask(k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask):
    """Per sequence in batch order: its keys and values [L+N, HKV, D] (the prefix pages, then the draft tokens)
    and what each draft token sees [N, L+N] (the whole prefix, then its tree ancestors and itself)."""
    ps, n = k_cache.shape[1], k_draft.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        yield (torch.cat([k_cache[idx].flatten(0, 1)[:length], k_draft[b]]),
               torch.cat([v_cache[idx].flatten(0, 1)[:length], v_draft[b]]),
               torch.cat([tree_mask.new_ones(n, length), tree_mask[b]], dim=1))


def run(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale):
    out = torch.empty_like(q)
    sequences = sequence_kv_mask(k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len,
                                 tree_mask)
    for b, (k, v, mask) in enumerate(sequences):
        out[b] = F.scaled_dot_product_attention(q[b].transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                                attn_mask=mask, scale=sm_scale, enable_gqa=True).transpose(0, 1)
    return out
