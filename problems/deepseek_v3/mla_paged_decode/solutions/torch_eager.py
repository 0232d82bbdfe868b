"""Eager PyTorch: gather each sequence's latent rows, float32 scores and softmax, then a bf16 P @ V.

The scores are computed from float32 copies: a bf16 ``q @ rows.T`` rounds each score (magnitude ~25
before scaling, a bf16 step of 0.125 there) and put 0.02-0.03% of the outputs outside the tolerance
on the H200. Real MLA kernels (FlashMLA, FlashInfer) keep Q.K^T in float32 accumulators and round
only P to bf16 for the second product, as this does.
"""

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
        scores = torch.matmul(q[b].float(), rows.float().t()) * softmax_scale
        out[b] = torch.matmul(scores.softmax(-1).to(q.dtype), rows[:, :latent])
    return out
