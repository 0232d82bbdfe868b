"""Eager PyTorch: gather each sequence's latent rows, float32 scores and softmax, then a bf16 P @ V.

The scores are computed from float32 copies: a bf16 ``q @ rows.T`` rounds each score (magnitude ~25
before scaling, a bf16 step of 0.125 there) and put 0.02-0.03% of the outputs outside the tolerance
on the H200. Real MLA kernels (FlashMLA, FlashInfer) keep Q.K^T in float32 accumulators and round
only P to bf16 for the second product, as this does.
"""

import torch

ROPE_DIMS = 64


def sequence_rows(kv_cache, kv_indptr, kv_indices, kv_last_page_len):
    """Each sequence's latent rows [L, CR] (bf16), gathered from its pages, in batch order."""
    ps = kv_cache.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        yield kv_cache[kv_indices[starts[b]:starts[b + 1]].long()].flatten(0, 1)[:length]


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    latent = q.shape[-1] - ROPE_DIMS
    out = torch.empty(*q.shape[:2], latent, dtype=q.dtype, device=q.device)
    for b, rows in enumerate(sequence_rows(kv_cache, kv_indptr, kv_indices, kv_last_page_len)):
        scores = torch.matmul(q[b].float(), rows.float().t()) * softmax_scale
        out[b] = torch.matmul(scores.softmax(-1).to(q.dtype), rows[:, :latent])
    return out
