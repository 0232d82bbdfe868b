"""Reference: o_proj then the residual add, accumulated in float32 and rounded once to bfloat16."""

import torch


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return (attn.float() @ weight.float().t() + residual.float()).to(attn.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """A weight of std 1/sqrt(in_features), as in a trained layer: the projection and the residual are
    both O(1), so a kernel that drops the residual fails on most elements, not only where the GEMM is small."""
    w = torch.randn(axes["H"], axes["HD"], generator=generator, device=device) * axes["HD"] ** -0.5
    return {"weight": w.to(torch.bfloat16)}
