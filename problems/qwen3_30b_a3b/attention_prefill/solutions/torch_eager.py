"""Straightforward PyTorch (as HF's sdpa path): repeat the KV heads, then causal SDPA in bfloat16."""

import torch
import torch.nn.functional as F


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    group = q.shape[2] // k.shape[2]
    k = k.transpose(1, 2).repeat_interleave(group, dim=1)
    v = v.transpose(1, 2).repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True)
    return out.transpose(1, 2)
