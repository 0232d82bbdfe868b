"""Reference: gate_up GEMM and SwiGLU in float32, rounded once to bfloat16."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    gate, up = (x.float() @ weight.float().t()).chunk(2, dim=-1)
    return (up * F.silu(gate)).to(x.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """A weight of std 1/sqrt(H), so gate and up are ~N(0, 1) and SiLU works in its curved range."""
    h = axes["H"]
    w = torch.randn(axes["F2"], h, generator=generator, device=device) * h**-0.5
    return {"weight": w.to(torch.bfloat16)}
