"""Reference: residual add + LayerNorm in float32 (biased variance, as nn.LayerNorm), rounded once."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # The residual stream carries per-token offsets and spreads: unit-normal rows would already be
    # nearly normalised and let a kernel that skips the statistics pass.
    b, s, h = axes["B"], axes["S"], axes["H"]
    offset = torch.randn(b, s, 1, generator=generator, device=device)
    spread = torch.rand(b, s, 1, generator=generator, device=device) * 2.5 + 0.5
    residual = torch.randn(b, s, h, generator=generator, device=device) * spread + offset
    return {"residual": residual.to(torch.bfloat16)}


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float() + residual.float()
    mean = h.mean(dim=-1, keepdim=True)
    var = (h - mean).square().mean(dim=-1, keepdim=True)
    out = (h - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()
    return out.to(x.dtype)
