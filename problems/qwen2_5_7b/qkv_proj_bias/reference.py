"""Reference: the QKV projection plus bias, accumulated in float32 and rounded once to bfloat16."""

import torch


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (x.float() @ weight.float().t() + bias.float()).to(x.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """A weight of std 1/sqrt(H), so x W^T and the N(0, 1) bias are the same size: a dropped bias fails."""
    h = axes["H"]
    w = torch.randn(axes["N"], h, generator=generator, device=device) * h**-0.5
    return {"weight": w.to(torch.bfloat16)}
