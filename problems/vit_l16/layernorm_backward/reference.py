"""Reference: LayerNorm backward written out in float32 from the saved statistics."""

import torch

EPS = 1e-12  # layer_norm_eps of the forward that saved rstd


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    n, seq, h = axes["N"], axes["L"], axes["H"]
    # Rows with their own offset and spread (as residual-stream activations have), so that mean and
    # rstd are far from 0 and 1 and a kernel that ignores either fails.
    offset = torch.randn(n, seq, 1, generator=generator, device=device)
    spread = torch.rand(n, seq, 1, generator=generator, device=device) * 2.5 + 0.5
    x = (torch.randn(n, seq, h, generator=generator, device=device) * spread + offset).to(torch.bfloat16)
    xf = x.float()
    mean = xf.mean(dim=-1)
    rstd = torch.rsqrt(xf.var(dim=-1, unbiased=False) + EPS)
    weight = (1.0 + 0.5 * torch.randn(h, generator=generator, device=device)).to(torch.bfloat16)
    return {"x": x, "mean": mean, "rstd": rstd, "weight": weight}


def run(grad_out: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dy = grad_out.float()
    xhat = (x.float() - mean[..., None]) * rstd[..., None]
    g = dy * weight.float()
    mean_g = g.mean(dim=-1, keepdim=True)
    mean_gx = (g * xhat).mean(dim=-1, keepdim=True)
    grad_x = rstd[..., None] * (g - mean_g - xhat * mean_gx)
    reduce_dims = tuple(range(x.dim() - 1))
    grad_weight = (dy * xhat).sum(dim=reduce_dims)
    grad_bias = dy.sum(dim=reduce_dims)
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype), grad_bias.to(weight.dtype)
