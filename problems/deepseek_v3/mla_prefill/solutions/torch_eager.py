"""Eager PyTorch: SDPA (causal) with the 192-wide q/k and 128-wide v heads, on 4-D views (3-D inputs
take SDPA's math path, whose T x T scores per head ran out of memory at 16,384 tokens on the H200)."""

import torch.nn.functional as F


def run(q, k, v, softmax_scale):
    # [T, H, D] -> [1, H, T, D]: the layout SDPA's fused (memory-efficient) kernels take
    out = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                         v.transpose(0, 1).unsqueeze(0), is_causal=True, scale=float(softmax_scale))
    return out.squeeze(0).transpose(0, 1)
