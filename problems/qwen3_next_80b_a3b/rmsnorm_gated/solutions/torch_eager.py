"""Eager PyTorch, as HF's Qwen3NextRMSNormGated.forward."""

import torch
import torch.nn.functional as F


def run(x, z, weight, eps):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    h = weight * h.to(x.dtype)
    return (h * F.silu(z.to(torch.float32))).to(x.dtype)
