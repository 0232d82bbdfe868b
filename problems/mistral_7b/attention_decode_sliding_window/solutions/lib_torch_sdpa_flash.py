"""PyTorch's scaled_dot_product_attention, flash backend only, over the window's slice of the cache: a
library baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version


def run(q, k_cache, v_cache, window):
    start = max(0, k_cache.shape[1] - int(window))  # the query is the newest position: it sees the last `window`
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache[:, start:].transpose(1, 2),
                                             v_cache[:, start:].transpose(1, 2), enable_gqa=True)
    return out.squeeze(2)
