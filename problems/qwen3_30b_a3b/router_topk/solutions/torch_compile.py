"""torch.compile of softmax + top-8 + renormalise, compiled on the first call (static shapes)."""

import torch

TOP_K = 8
_compiled = None


def _route(logits):
    weights, ids = torch.softmax(logits, dim=-1).topk(TOP_K, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids.to(torch.int32)


def run(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_route, dynamic=False)
    return _compiled(logits)
