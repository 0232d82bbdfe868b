"""torch.compile of the per-expert SwiGLU MLP, compiled on the first call; the routing loop stays in
Python (its token counts are data-dependent). dynamic=True because each expert sees a different
number of tokens: static shapes would recompile for every count."""

import torch
import torch.nn.functional as F

_compiled = None


def _expert(x_e, w13_e, w2_e, weight_e):
    gate, up = F.linear(x_e, w13_e).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w2_e).float() * weight_e


def run(x: torch.Tensor, residual: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
        topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_expert, dynamic=True)
    out = residual.float()
    for e in topk_ids.unique().tolist():
        tok, slot = torch.where(topk_ids == e)
        out.index_add_(0, tok, _compiled(x[tok], w13[e], w2[e], topk_weights[tok, slot, None]))
    return out.to(x.dtype)
