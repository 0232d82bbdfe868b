"""Eager PyTorch: per expert with rows, dequantize its MXFP4 weight to bf16 (lookup table and exp2 scales), one
bf16 matmul."""

import torch

FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def run(x_sorted, group_sizes, w_blocks, w_scales):
    table = torch.tensor(FP4_VALUES, dtype=torch.bfloat16, device=x_sorted.device)
    out = torch.empty(x_sorted.shape[0], w_blocks.shape[1], dtype=x_sorted.dtype, device=x_sorted.device)
    start = 0
    for e, n in enumerate(group_sizes.tolist()):
        if not n:
            continue
        codes = torch.stack([w_blocks[e] & 0x0F, w_blocks[e] >> 4], dim=-1).flatten(-2).long()
        scale = torch.exp2(w_scales[e].float() - 127).to(torch.bfloat16).repeat_interleave(32, dim=-1)
        out[start:start + n] = x_sorted[start:start + n] @ (table[codes] * scale).t()
        start += n
    return out
