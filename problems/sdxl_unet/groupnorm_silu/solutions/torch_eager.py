"""Straightforward PyTorch, as Diffusers' ResnetBlock2D runs it: F.group_norm then F.silu."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, num_groups: int, eps: float) -> torch.Tensor:
    return F.silu(F.group_norm(x, num_groups, weight, bias, eps))
