"""Reference: Gemma2RMSNorm ((1 + w) scale) before and after the residual add, in float32; the stream
is rounded to bfloat16 (it is stored) and the second norm reads that stored value, as the model does."""

import torch


def _gemma_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) * (1.0 + weight.float())


def run(x: torch.Tensor, residual: torch.Tensor, post_weight: torch.Tensor, pre_weight: torch.Tensor,
        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    stream = (residual.float() + _gemma_rmsnorm(x.float(), post_weight, eps)).to(x.dtype)
    return _gemma_rmsnorm(stream.float(), pre_weight, eps).to(x.dtype), stream
