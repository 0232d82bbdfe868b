"""torch.compile of the angle-table + rotation (Inductor fuses it into one pointwise kernel per tensor)."""

import torch

AXES_DIM = (16, 56, 56)
THETA = 10000.0
_compiled = None


def _eager(q: torch.Tensor, k: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.cat([ids[:, i, None].float() * THETA ** (-torch.arange(0, d, 2, device=ids.device) / d)
                        for i, d in enumerate(AXES_DIM)], dim=-1)
    cos, sin = angles.cos(), angles.sin()
    outs = []
    for x in (q, k):
        x0, x1 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
        outs.append(torch.stack([cos * x0 - sin * x1, sin * x0 + cos * x1], dim=-1).flatten(-2).to(x.dtype))
    return outs[0], outs[1]


def run(q: torch.Tensor, k: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(q, k, ids)
