"""Eager PyTorch, as vLLM's grouped_topk (float32)."""

import torch


def run(logits, bias):
    t, e = logits.shape
    scores = logits.sigmoid()
    choice = scores + bias
    group_scores = choice.view(t, 8, -1).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = group_scores.topk(4, dim=-1, sorted=False)[1]
    mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1).unsqueeze(-1).expand(t, 8, e // 8).reshape(t, e)
    ids = choice.masked_fill(mask == 0, float("-inf")).topk(8, dim=-1, sorted=True)[1]
    weights = scores.gather(1, ids)
    return weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * 2.5, ids.to(torch.int32)
