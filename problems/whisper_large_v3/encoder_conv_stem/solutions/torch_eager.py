"""Straightforward PyTorch, as transformers' WhisperEncoder runs it: two cuDNN conv1d + GELU, bf16 in between."""

import torch
import torch.nn.functional as F


def run(mel: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    h = F.gelu(F.conv1d(mel, w1, b1, padding=1))
    return F.gelu(F.conv1d(h, w2, b2, stride=2, padding=1)).transpose(1, 2).contiguous()
