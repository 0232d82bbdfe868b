"""torch.compile of linear + residual add, compiled on the first call (static shapes)."""

import torch
import torch.nn.functional as F

_compiled = None


def _down_proj_residual(act, weight, residual):
    return F.linear(act, weight) + residual


def run(act: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_down_proj_residual, dynamic=False)
    return _compiled(act, weight, residual)
