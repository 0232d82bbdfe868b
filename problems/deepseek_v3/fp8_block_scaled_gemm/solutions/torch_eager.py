"""Straightforward PyTorch: dequantize both operands to bfloat16 (fp8 * expanded scales), one bf16 linear."""

import torch
import torch.nn.functional as F

BLOCK = 128


def run(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor) -> torch.Tensor:
    a_bf16 = (a.float() * a_scale.repeat_interleave(BLOCK, dim=1)).to(torch.bfloat16)
    b_full_scale = b_scale.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    b_bf16 = (b.float() * b_full_scale).to(torch.bfloat16)
    return F.linear(a_bf16, b_bf16)
