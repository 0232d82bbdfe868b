"""PyTorch's flex_attention (compiled on the first call) over the packed batch, with a block mask that keeps each
query causal inside its own sequence (built per call from cu_seqlens, as a server builds it per batch): a library
baseline."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
_compiled = None


def run(q, k, v, cu_seqlens, sm_scale):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8,
        # past which it would run flex_attention uncompiled (the full score matrix: out of memory at long prompts)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    t = q.shape[0]
    positions = torch.arange(t, device=q.device)
    seq = torch.searchsorted(cu_seqlens[1:].to(torch.int64), positions, right=True)  # sequence of each row

    def same_sequence_causal(b, h, q_idx, kv_idx):
        return (seq[q_idx] == seq[kv_idx]) & (q_idx >= kv_idx)

    mask = create_block_mask(same_sequence_causal, None, None, t, t, device=q.device)
    out = _compiled(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], block_mask=mask,
                    scale=float(sm_scale), enable_gqa=True)
    return out[0].transpose(0, 1)
