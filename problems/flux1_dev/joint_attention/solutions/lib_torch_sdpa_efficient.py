"""PyTorch's scaled_dot_product_attention, efficient backend only (full attention): a library baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # read by solbench (never imported): skipped where the backend cannot run


def run(q, k, v):
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)
