"""torch.compile of the eager candidate, compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _eager(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float() + residual.float()
    return F.layer_norm(h, (x.shape[-1],), weight.float(), bias.float(), eps).to(x.dtype)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(x, residual, weight, bias, eps)
