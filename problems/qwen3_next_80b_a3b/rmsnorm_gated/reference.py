"""Reference: Qwen3NextRMSNormGated in float32 (the weight applied to the bf16-rounded normalised value, as HF does)."""

import torch
import torch.nn.functional as F


def run(x, z, weight, eps):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    h = weight.float() * h.to(x.dtype).float()
    return (h * F.silu(z.float())).to(x.dtype)
