"""Straightforward PyTorch, as transformers' eager BertSelfAttention: additive finfo.min mask, softmax in bf16."""

import torch


def run(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    bias = (~mask).to(scores.dtype)[:, None, None, :] * torch.finfo(scores.dtype).min
    return torch.softmax(scores * scale + bias, dim=-1)
