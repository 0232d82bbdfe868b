"""Eager PyTorch: SDPA (causal) with the 192-wide q/k and 128-wide v heads."""

import torch.nn.functional as F


def run(q, k, v, softmax_scale):
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                                         scale=float(softmax_scale))
    return out.transpose(0, 1)
