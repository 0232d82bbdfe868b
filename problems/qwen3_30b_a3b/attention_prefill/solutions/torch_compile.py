"""torch.compile of causal GQA SDPA, compiled on the first call (static shapes)."""

import torch
import torch.nn.functional as F

_compiled = None


def _causal_gqa(q, k, v):
    group = q.shape[2] // k.shape[2]
    k = k.transpose(1, 2).repeat_interleave(group, dim=1)
    v = v.transpose(1, 2).repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True).transpose(1, 2)


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_causal_gqa, dynamic=False)
    return _compiled(q, k, v)
