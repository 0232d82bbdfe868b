"""Eager PyTorch, as serving engines' fallback samplers do: sort the whole vocabulary (stable, so ties
go to the lower id), softmax over the top k, mask the top-p tail, then inverse CDF in token-id order."""

import torch


def run(logits, u, top_k, top_p, temperature):
    vocab = logits.shape[-1]
    k = vocab if top_k <= 0 else min(int(top_k), vocab)
    values, ids = torch.sort(logits, dim=-1, descending=True, stable=True)
    p = torch.softmax(values[:, :k] / temperature, dim=-1)
    if top_p < 1.0:
        p = p.masked_fill(p.cumsum(-1) - p >= top_p, 0.0)
    by_id, perm = torch.sort(ids[:, :k], dim=-1)
    cdf = p.gather(-1, perm).cumsum(-1)
    pos = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).clamp(max=k - 1)
    return by_id.gather(-1, pos).squeeze(-1).to(torch.int32)
