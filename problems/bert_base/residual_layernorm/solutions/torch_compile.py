"""torch.compile of the eager candidate, compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _eager(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x + residual, (x.shape[-1],), weight, bias, eps)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(x, residual, weight, bias, eps)
