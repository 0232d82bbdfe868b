"""torch.compile of the per-expert MXFP4 dequantization (codes to bf16 through the table, times the exp2 block
scales: one fused kernel), compiled once on the first call; the loop over experts and its matmuls stay eager.

Compiling this folder's whole torch_eager.run specialised on group_sizes (read on the host with .tolist()), so
every new routing recompiled, inside the timed window. One expert's weight has the same shape for every expert
and every routing, so the dequantization compiles once (static shapes); a matmul's row count is the expert's
group size, a value, so it runs eager (Inductor would call the same aten mm for it).
"""

import torch

FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
_compiled = None


def _dequantize(blocks, scales, table):
    """One expert's [N, K/2] packed nibbles and [N, K/32] exponent bytes to its [N, K] bf16 weight."""
    codes = torch.stack([blocks & 0x0F, blocks >> 4], dim=-1).flatten(-2).long()
    scale = torch.exp2(scales.float() - 127).to(torch.bfloat16).repeat_interleave(32, dim=-1)
    return table[codes] * scale


def run(x_sorted, group_sizes, w_blocks, w_scales):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_dequantize, dynamic=False)
    table = torch.tensor(FP4_VALUES, dtype=torch.bfloat16, device=x_sorted.device)
    out = torch.empty(x_sorted.shape[0], w_blocks.shape[1], dtype=x_sorted.dtype, device=x_sorted.device)
    start = 0
    for e, n in enumerate(group_sizes.tolist()):
        if n:
            out[start:start + n] = x_sorted[start:start + n] @ _compiled(w_blocks[e], w_scales[e], table).t()
            start += n
    return out
