"""Straightforward PyTorch (HF's expert loop): per touched expert, bfloat16 linears on its tokens,
then a float32 index_add of the weighted outputs onto the residual."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
        topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    out = residual.float()
    for e in topk_ids.unique().tolist():
        tok, slot = torch.where(topk_ids == e)
        gate, up = F.linear(x[tok], w13[e]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, w2[e])
        out.index_add_(0, tok, y.float() * topk_weights[tok, slot, None])
    return out.to(x.dtype)
