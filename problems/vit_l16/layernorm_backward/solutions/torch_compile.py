"""torch.compile of the LayerNorm backward formula (Inductor fuses it into row and column reductions)."""

import torch

_compiled = None


def _backward(grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
              weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dy = grad_out.float()
    xhat = (x.float() - mean[..., None]) * rstd[..., None]
    g = dy * weight.float()
    grad_x = rstd[..., None] * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    dims = tuple(range(x.dim() - 1))
    return grad_x.to(x.dtype), (dy * xhat).sum(dims).to(weight.dtype), dy.sum(dims).to(weight.dtype)


def run(grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_backward, dynamic=False)
    return _compiled(grad_out, x, mean, rstd, weight)
