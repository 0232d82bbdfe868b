"""Reference: Mixtral routing with float64 logits, softmax, top-2, renormalise, scattered to [T, E]."""

import torch

TOP_K = 2


def run(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    probs = (x.double() @ weight.double().t()).softmax(dim=-1)
    top, ids = probs.topk(TOP_K, dim=-1)
    dense = torch.zeros_like(probs).scatter_(1, ids, top / top.sum(dim=-1, keepdim=True))
    return dense.float()


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """A gate weight of std 1/sqrt(H), so logits are ~N(0, 1) as in a trained router."""
    h = axes["H"]
    w = torch.randn(axes["E"], h, generator=generator, device=device) * h**-0.5
    return {"weight": w.to(torch.bfloat16)}
