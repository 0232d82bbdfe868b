"""Reference: both stem convolutions in float32 (TF32 off), the intermediate kept in float32."""

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
    # Trained-scale weights (std 1/sqrt(fan_in)) keep both GELUs in their curved range.
    m, d = axes["M"], axes["D"]
    w1 = torch.randn(d, m, 3, generator=generator, device=device) / math.sqrt(3 * m)
    w2 = torch.randn(d, d, 3, generator=generator, device=device) / math.sqrt(3 * d)
    return {"w1": w1.to(torch.bfloat16), "w2": w2.to(torch.bfloat16)}


def run(mel: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    with _exact_fp32():
        h = F.gelu(F.conv1d(mel.float(), w1.float(), b1.float(), padding=1))
        out = F.gelu(F.conv1d(h, w2.float(), b2.float(), stride=2, padding=1))
    return out.transpose(1, 2).contiguous().to(mel.dtype)
