"""Reference: GroupNorm + SiLU written out in float32 (statistics per sample and group)."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Channels with their own offset and spread (as conv outputs have), so each group's statistics
    # differ from the others' and from the whole sample's: a kernel that normalises over the wrong
    # set of channels fails.
    n, c, h, w = axes["N"], axes["C"], axes["H"], axes["W"]
    offset = torch.randn(n, c, 1, 1, generator=generator, device=device)
    spread = torch.rand(n, c, 1, 1, generator=generator, device=device) * 2.5 + 0.5
    x = torch.randn(n, c, h, w, generator=generator, device=device) * spread + offset
    return {"x": x.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, num_groups: int, eps: float) -> torch.Tensor:
    xg = x.float().reshape(x.shape[0], num_groups, -1)
    mean = xg.mean(dim=-1, keepdim=True)
    var = (xg - mean).square().mean(dim=-1, keepdim=True)
    normed = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)
    affine = normed * weight.float()[None, :, None, None] + bias.float()[None, :, None, None]
    return (affine * torch.sigmoid(affine)).to(x.dtype)
