"""Straightforward PyTorch, as HF does it: float32 softmax, topk, divide by the top-k sum."""

import torch

TOP_K = 8


def run(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    weights, ids = torch.softmax(logits, dim=-1).topk(TOP_K, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids.to(torch.int32)
