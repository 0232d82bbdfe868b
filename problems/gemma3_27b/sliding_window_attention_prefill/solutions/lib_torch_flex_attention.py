"""PyTorch's flex_attention (compiled on the first call) with Gemma 3's sliding window as a block mask: a library
baseline."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
SCALE = 168**-0.5  # query_pre_attn_scalar ** -0.5
_compiled = None
_masks = {}  # one block mask per (prompt length, window, device): every local layer of a forward pass shares it


def _band_mask(length, window, device):
    key = (length, window, str(device))
    if key not in _masks:
        def in_band(b, h, q_idx, kv_idx):  # query i sees keys i - W < j <= i
            # kv_idx + window is one row of keys, not an S x S difference (the mask is built densely once)
            return (kv_idx <= q_idx) & (kv_idx + window > q_idx)

        _masks[key] = create_block_mask(in_band, None, None, length, length, device=device)
    return _masks[key]


def run(q, k, v, window):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8,
        # past which it would run flex_attention uncompiled (the full score matrix: out of memory at long prompts)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    mask = _band_mask(q.shape[1], int(window), q.device)
    out = _compiled(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=mask, scale=SCALE,
                    enable_gqa=True)
    return out.transpose(1, 2)
