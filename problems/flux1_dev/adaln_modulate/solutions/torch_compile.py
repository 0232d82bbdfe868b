"""torch.compile of the eager candidate, compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _eager(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    normed = F.layer_norm(x.float(), (x.shape[-1],), eps=eps)
    return (normed * (1 + scale.float()[:, None, :]) + shift.float()[:, None, :]).to(x.dtype)


def run(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(x, shift, scale, eps)
