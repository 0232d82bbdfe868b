"""Reference: LayerNorm (no affine) + AdaLN modulation in float32, rounded once to bfloat16."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # DiT hidden states carry per-token offsets and spreads: unit-normal rows would already be
    # nearly normalised and let a kernel that skips the statistics pass.
    b, seq, c = axes["B"], axes["L"], axes["C"]
    offset = torch.randn(b, seq, 1, generator=generator, device=device)
    spread = torch.rand(b, seq, 1, generator=generator, device=device) * 2.5 + 0.5
    x = torch.randn(b, seq, c, generator=generator, device=device) * spread + offset
    return {"x": x.to(torch.bfloat16)}


def run(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).square().mean(dim=-1, keepdim=True)
    normed = (xf - mean) * torch.rsqrt(var + eps)
    out = normed * (1.0 + scale.float()[:, None, :]) + shift.float()[:, None, :]
    return out.to(x.dtype)
