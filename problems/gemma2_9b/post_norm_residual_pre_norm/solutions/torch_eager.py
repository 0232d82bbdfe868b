"""Straightforward PyTorch: both Gemma RMSNorms in float32 with the add in float32; only the stored
stream and the output are rounded to bfloat16."""

import torch


def _norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight.float())


def run(x: torch.Tensor, residual: torch.Tensor, post_weight: torch.Tensor, pre_weight: torch.Tensor,
        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    stream = (residual.float() + _norm(x.float(), post_weight, eps)).to(x.dtype)
    return _norm(stream.float(), pre_weight, eps).to(x.dtype), stream
