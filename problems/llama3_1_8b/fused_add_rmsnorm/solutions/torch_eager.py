"""Straightforward PyTorch: a bfloat16 add, then torch.nn.functional.rms_norm of the sum."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    summed = x + residual
    return F.rms_norm(summed, (summed.shape[-1],), weight, eps), summed
