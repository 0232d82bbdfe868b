"""Reference: the closed-form RMSNorm backward in float64 (tests check it against autograd)."""

import torch


def run(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    g, xd, w = grad_out.double(), x.double(), weight.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = xd * rstd
    gw = g * w
    # d/dx of x*rstd: rstd * (gw - xhat * mean(gw * xhat)), the projection out of the x direction.
    grad_x = rstd * (gw - xhat * (gw * xhat).mean(dim=-1, keepdim=True))
    grad_weight = (g * xhat).sum(dim=0)
    return grad_x.to(x.dtype), grad_weight.float()
