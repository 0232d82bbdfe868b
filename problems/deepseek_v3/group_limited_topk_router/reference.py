"""Reference: group-limited top-k in float64, sorted by descending choice score."""

import torch

N_GROUP, TOPK_GROUP, TOP_K, SCALING = 8, 4, 8, 2.5
BIAS_STD = 0.05  # trained correction biases are small next to the sigmoid scores


def run(logits, bias):
    t, e = logits.shape
    scores = torch.sigmoid(logits.double())
    choice = scores + bias.double()
    group_scores = choice.view(t, N_GROUP, e // N_GROUP).topk(2, dim=-1).values.sum(dim=-1)
    groups = group_scores.topk(TOPK_GROUP, dim=-1).indices
    keep = torch.zeros(t, N_GROUP, dtype=torch.bool, device=logits.device).scatter_(1, groups, True)
    masked = choice.masked_fill(~keep.repeat_interleave(e // N_GROUP, dim=1), float("-inf"))
    ids = masked.topk(TOP_K, dim=-1, sorted=True).indices
    weights = scores.gather(1, ids)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * SCALING
    return weights.float(), ids.to(torch.int32)


def make_inputs(axes, generator, device):
    logits = torch.randn(axes["T"], axes["E"], generator=generator, device=device) * 2.0
    bias = torch.randn(axes["E"], generator=generator, device=device) * BIAS_STD
    return {"logits": logits, "bias": bias}
