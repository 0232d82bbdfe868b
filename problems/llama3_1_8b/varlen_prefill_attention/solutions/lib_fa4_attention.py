"""FlashAttention 4's flash_attn_varlen_func (CuTe DSL), causal GQA, as a library baseline. Needs flash-attn-4.

Skipped when flash_attn.cute is absent. The problem's layout is flash_attn_varlen_func's: q [T, HQ, D], k and v
[T, HKV, D], sequence i in rows cu_seqlens[i]:cu_seqlens[i+1] (int32) of all three, so cu_seqlens serves queries
and keys alike, and the causal mask of a sequence with as many queries as keys is the plain lower triangle.
"""

import torch
from flash_attn.cute import flash_attn_varlen_func

BASELINE = "flash-attn-4"  # read by solbench (never imported): the record names the library and its version
# flash-attn-4 installs flash_attn/cute only: FlashAttention 2 alone (flash_attn without .cute) is absent too.
REQUIRES = ["flash_attn.cute"]  # read by solbench (never imported) to skip this file when it is not installed


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, sm_scale: float) -> torch.Tensor:
    # The longest prompt as a host int, as a serving engine passes it with its batch metadata: without it the
    # kernel's grid covers T query rows per sequence. Reading it is one small copy to the host, counted in the time.
    longest = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
    # keywords only: qv stands before cu_seqlens_q in flash-attn-4's signature
    result = flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens, max_seqlen_q=longest,
                                    max_seqlen_k=longest, softmax_scale=float(sm_scale), causal=True)
    # (out, lse) in the 4.0 betas; a bare out is taken too
    return result[0] if isinstance(result, tuple) else result
