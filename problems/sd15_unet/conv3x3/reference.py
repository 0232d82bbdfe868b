"""Reference: 3x3 convolution (padding 1, bias) in float32 with TF32 off, rounded once to bfloat16."""

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F


@contextmanager
def _exact_fp32() -> Iterator[None]:
    # cuDNN runs float32 convolutions in TF32 by default; the reference must be the accurate side.
    prev = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = prev


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Trained-scale weights (std 1/sqrt(fan_in)): outputs near unit scale, so the bias matters.
    w = torch.randn(axes["CO"], axes["CI"], 3, 3, generator=generator, device=device) / math.sqrt(9 * axes["CI"])
    return {"weight": w.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    with _exact_fp32():
        out = F.conv2d(x.float(), weight.float(), bias.float(), padding=1)
    return out.to(x.dtype)
