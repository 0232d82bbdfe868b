"""torch.compile of the eager candidate, compiled on the first call."""

import torch

_compiled = None


def _eager(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    weight_size = (grad_out.shape[1], x.shape[1], 3, 3)
    return torch.nn.grad.conv2d_weight(x, weight_size, grad_out, padding=1)


def run(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_eager, dynamic=False)
    return _compiled(x, grad_out)
