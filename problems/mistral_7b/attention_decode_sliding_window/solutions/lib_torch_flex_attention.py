"""PyTorch's flex_attention (compiled on the first call) over the whole cache with the sliding window as a
mask_mod; the block mask (the window's KV blocks only) is built per call from the window's bounds, two small
ops, rather than by create_block_mask evaluating the mask_mod over every position. A library baseline."""

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
KV_BLOCK = 128  # flex's default sparse block
_compiled = None


def _window_block_mask(length: int, start: int, device) -> BlockMask:
    """The KV blocks from the one holding ``start`` to the last, shared by every sequence and head; positions
    before ``start`` in the first of them are masked by the mask_mod."""
    n_blocks = -(-length // KV_BLOCK)
    first = start // KV_BLOCK
    order = ((torch.arange(n_blocks, dtype=torch.int32, device=device) + first) % n_blocks).view(1, 1, 1, -1)
    count = torch.full((1, 1, 1), n_blocks - first, dtype=torch.int32, device=device)

    def in_window(b, h, q_idx, kv_idx):
        return kv_idx >= start

    return BlockMask.from_kv_blocks(count, order, BLOCK_SIZE=(128, KV_BLOCK), mask_mod=in_window,
                                    seq_lengths=(1, length), compute_q_blocks=False)  # forward only


def run(q, k_cache, v_cache, window):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    length = k_cache.shape[1]
    start = max(0, length - int(window))  # the query is the newest position: it sees the last `window`
    mask = _window_block_mask(length, start, q.device)
    out = _compiled(q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2), block_mask=mask,
                    enable_gqa=True)
    return out.squeeze(2)
