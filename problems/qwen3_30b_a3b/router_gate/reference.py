"""Reference: router logits in float64 (cheap at 128 outputs), returned as float32."""

import torch


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (x.double() @ weight.double().t()).float()


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """A gate weight of std 1/sqrt(H), so logits are ~N(0, 1) as in a trained router."""
    h = axes["H"]
    w = torch.randn(axes["E"], h, generator=generator, device=device) * h**-0.5
    return {"weight": w.to(torch.bfloat16)}
