"""Straightforward PyTorch (as HF's decoder layer): bfloat16 add, then F.rms_norm on the sum."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    stream = x + residual
    return F.rms_norm(stream, (stream.shape[-1],), weight, eps), stream
