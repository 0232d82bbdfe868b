"""Reference: softmax in float64, top-k, renormalise (Qwen3MoeSparseMoeBlock with norm_topk_prob)."""

import torch

TOP_K = 8


def run(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    probs = logits.double().softmax(dim=-1)
    weights, ids = probs.topk(TOP_K, dim=-1, sorted=True)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.float(), ids.to(torch.int32)
