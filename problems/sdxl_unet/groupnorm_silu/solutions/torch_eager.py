"""Straightforward PyTorch, as SDXL's reference code runs it: GroupNorm in float32, then SiLU in bfloat16.

Stability's sgm (``GroupNorm32``: ``super().forward(x.float()).type(x.dtype)``) and autocast (group_norm
is on its float32 list) both normalise in float32. Diffusers' pure-bf16 ``F.group_norm`` is not used here:
CUDA builds of torch up to 2.11 round each group's mean and rstd to bfloat16 before normalising (fixed
upstream by pytorch/pytorch#183946), which misses the tolerance once a group's mean is a few of its
standard deviations (the problem's notes).
"""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, num_groups: int, eps: float) -> torch.Tensor:
    normed = F.group_norm(x.float(), num_groups, weight.float(), bias.float(), eps)
    return F.silu(normed.to(x.dtype))
