"""Reference: Qwen3MoeRMSNorm over the hidden size, in float32, rounded once to the input dtype."""

import torch


def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    inv_rms = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)
    return (xf * inv_rms * weight.float()).to(x.dtype)
