"""Reference: masked, scaled softmax in float32, rounded once to bfloat16."""

import math

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    b, s, nh = axes["B"], axes["S"], axes["NH"]
    # Scores of unit-normal q, k over head dim 64 have std sqrt(64) = 8; after the 1/8 scale the
    # logits have std 1, as in a trained model's typical head.
    scores = torch.randn(b, nh, s, s, generator=generator, device=device) * math.sqrt(64)
    # Right-padded batch: each sequence has its own length in [1, S]; the first is the longest.
    lengths = torch.randint(1, s + 1, (b,), generator=generator, device=device)
    lengths[0] = s
    mask = torch.arange(s, device=device)[None, :] < lengths[:, None]
    return {"scores": scores.to(torch.bfloat16), "mask": mask}


def run(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    logits = scores.float() * scale
    logits = logits.masked_fill(~mask[:, None, None, :], float("-inf"))
    return torch.softmax(logits, dim=-1).to(scores.dtype)
