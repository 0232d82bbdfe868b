"""torch.compile of the eager candidate, compiled on the first call."""

import torch
import torch.nn.functional as F

_compiled = None


def _eager(pixels: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    patch = weight.shape[-1]
    return F.conv2d(pixels, weight, bias, stride=patch).flatten(2).transpose(1, 2).contiguous()


def run(pixels: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(pixels, weight, bias)
