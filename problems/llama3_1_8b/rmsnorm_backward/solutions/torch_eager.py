"""Straightforward PyTorch: the closed-form backward in float32 (what autograd of the HF norm computes)."""

import torch


def run(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    g, xf = grad_out.float(), x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = xf * rstd
    gw = g * weight.float()
    dot = (gw * xhat).sum(dim=-1, keepdim=True) / x.shape[-1]
    return (rstd * (gw - xhat * dot)).to(x.dtype), (g * xhat).sum(dim=0)
