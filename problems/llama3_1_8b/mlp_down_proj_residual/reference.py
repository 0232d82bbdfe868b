"""Reference: Llama down_proj followed by the residual add, in float32 accumulation."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Weight at the scale of a trained layer (std F^-0.5), so the projection and the residual are
    # both O(1) in the output and a kernel that drops either one fails the tolerance.
    weight = torch.randn(axes["H"], axes["F"], generator=generator, device=device) * axes["F"] ** -0.5
    return {"weight": weight.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    # Accumulate in float32 (as tensor-core GEMMs do), round once to bfloat16.
    out = x.float() @ weight.float().t() + residual.float()
    return out.to(x.dtype)
