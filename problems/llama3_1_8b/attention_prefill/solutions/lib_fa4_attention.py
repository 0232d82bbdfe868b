"""FlashAttention 4's flash_attn_func (CuTe DSL), causal GQA, as a library baseline. Needs flash-attn-4.

Skipped when flash_attn.cute is absent. The layout is FlashAttention's own: q [B, S, HQ, D], k and v [B, S, HKV, D],
query head h reading KV head h // (HQ / HKV), the causal mask aligned to the bottom right (top left here: queries =
keys). Strided views are taken as they are: flash_attn.cute copies only those whose rows it cannot load aligned.
"""

import torch
from flash_attn.cute import flash_attn_func

BASELINE = "flash-attn-4"  # read by solbench (never imported): the record names the library and its version
# flash-attn-4 installs flash_attn/cute only: FlashAttention 2 alone (flash_attn without .cute) is absent too.
REQUIRES = ["flash_attn.cute"]  # read by solbench (never imported) to skip this file when it is not installed


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # keywords only: qv and gather_kv_indices stand before softmax_scale in flash-attn-4's signature
    result = flash_attn_func(q, k, v, softmax_scale=q.shape[-1] ** -0.5, causal=True)
    # (out, lse) in the 4.0 betas; a bare out is taken too
    return result[0] if isinstance(result, tuple) else result
