"""Reference: 3x3 convolution of NHWC activations with a KRSC weight, in float32 (no TF32)."""

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
    fan_in = 9 * axes["CI"]
    w = torch.randn(axes["CO"], 3, 3, axes["CI"], generator=generator, device=device) / math.sqrt(fan_in)
    return {"weight": w.to(torch.bfloat16)}


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    with _exact_fp32():
        out = F.conv2d(x.float().permute(0, 3, 1, 2), weight.float().permute(0, 3, 1, 2), bias.float(), padding=1)
    return out.permute(0, 2, 3, 1).contiguous().to(x.dtype)
