"""Reference: LayerNorm written out in float32 (biased variance, as nn.LayerNorm), rounded once."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Tokens with their own offset and spread (as residual-stream activations have): unit-normal
    # rows are already nearly normalised, which would let a kernel that skips the statistics pass.
    n, seq, h = axes["N"], axes["L"], axes["H"]
    offset = torch.randn(n, seq, 1, generator=generator, device=device)
    spread = torch.rand(n, seq, 1, generator=generator, device=device) * 2.5 + 0.5
    x = torch.randn(n, seq, h, generator=generator, device=device) * spread + offset
    return {"x": x.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).square().mean(dim=-1, keepdim=True)
    out = (xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()
    return out.to(x.dtype)
