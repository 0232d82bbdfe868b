"""PyTorch's flex_attention (compiled on the first call) with Llama 4's chunked local attention as a block mask
(causal inside each chunk): a library baseline."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
_compiled = None
_masks = {}  # one block mask per (prompt length, chunk, device): every chunked layer of a forward pass shares it


def _chunk_mask(length, chunk, device):
    key = (length, chunk, str(device))
    if key not in _masks:
        def causal_in_chunk(b, h, q_idx, kv_idx):  # j <= i and both in the same chunk
            return (kv_idx <= q_idx) & (q_idx // chunk == kv_idx // chunk)

        _masks[key] = create_block_mask(causal_in_chunk, None, None, length, length, device=device)
    return _masks[key]


def run(q, k, v, chunk):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8,
        # past which it would run flex_attention uncompiled (the full score matrix: out of memory at long prompts)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    mask = _chunk_mask(q.shape[1], int(chunk), q.device)
    out = _compiled(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=mask, enable_gqa=True)
    return out.transpose(1, 2)
