"""Reference: the two gradient GEMMs of a linear layer in float32 accumulation, rounded once."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Weight at the scale of a trained layer (std F^-0.5), as in mlp_down_proj_residual.
    weight = torch.randn(axes["H"], axes["F"], generator=generator, device=device) * axes["F"] ** -0.5
    return {"weight": weight.to(torch.bfloat16)}


def run(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    g = grad_out.float()
    grad_x = g @ weight.float()
    grad_weight = g.t() @ x.float()
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype)
