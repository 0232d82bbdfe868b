"""PyTorch's scaled_dot_product_attention, cudnn backend only (causal, GQA): a library baseline."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # read by solbench (never imported): skipped where the backend cannot run


# .contiguous(): a strided view whose rows are not 16-byte aligned crashes or corrupts SDPA's fused
# kernels (H200, torch 2.11, the edge round "strided": flash a misaligned address, cuDNN NaN, efficient
# no kernel); a no-op for contiguous inputs.
def run(q, k, v):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    # [B, S, H, D] -> [B, H, S, D] views; the backend is forced, never a silent fallback to another
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True, enable_gqa=True)
    return out.transpose(1, 2)
