"""PyTorch's scaled_dot_product_attention, memory-efficient backend only (causal, 192-wide q/k and 128-wide v
heads, which the flash backend does not take): a library baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # read by solbench (never imported): skipped where the backend cannot run


def run(q, k, v, softmax_scale):
    # [T, H, D] -> [1, H, T, D] views: the fused backends take 4-D inputs only (3-D ones go to the math path)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                             is_causal=True, scale=float(softmax_scale))
    return out[0].transpose(0, 1)
