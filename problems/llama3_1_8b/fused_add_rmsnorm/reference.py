"""Reference: residual add rounded to the stream dtype, then LlamaRMSNorm of that sum in float32."""

import torch


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    # The new residual is stored in bfloat16, and the norm reads that stored value (vLLM semantics).
    summed = (x.float() + residual.float()).to(x.dtype)
    sf = summed.float()
    rstd = torch.rsqrt(sf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (sf * rstd * weight.float()).to(x.dtype), summed
