"""Eager PyTorch: sort the (token, expert) pairs by expert, one matmul per touched expert."""

import torch


def run(x, w13, topk_ids):
    t, k = topk_ids.shape
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    rows = x[order // k]
    out = torch.empty(t * k, w13.shape[1], dtype=x.dtype, device=x.device)
    start = 0
    for e, n in enumerate(counts):
        if n:
            out[order[start:start + n]] = rows[start:start + n] @ w13[e].t()
            start += n
    return out.view(t, k, -1)
