"""Eager PyTorch: gather each sequence's latent rows, then two matmuls and a float32 softmax."""

import torch

ROPE_DIMS = 64


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    ps, latent = kv_cache.shape[1], q.shape[-1] - ROPE_DIMS
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    out = torch.empty(*q.shape[:2], latent, dtype=q.dtype, device=q.device)
    for b, length in enumerate(lengths):
        rows = kv_cache[kv_indices[starts[b]:starts[b + 1]].long()].flatten(0, 1)[:length]  # [L, CR] bf16
        scores = torch.matmul(q[b], rows.t()).float() * softmax_scale
        out[b] = torch.matmul(scores.softmax(-1).to(q.dtype), rows[:, :latent])
    return out
