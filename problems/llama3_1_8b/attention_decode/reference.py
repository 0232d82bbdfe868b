"""Reference: GQA decode attention (one query token per sequence over the whole KV cache) in float32."""

import torch

# Query scale of make_inputs: with N(0,1) q and k the scores q.k/sqrt(D) have std 1 and the softmax
# is almost flat, so over a long cache the output averages to ~0 (std ~ L^-0.5) and a wrong kernel
# could hide under atol. Trained models attend sharply; q * 3 gives scores with std 3.
QUERY_SCALE = 3.0


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    q = torch.randn(axes["B"], axes["HQ"], axes["D"], generator=generator, device=device) * QUERY_SCALE
    return {"q": q.to(torch.bfloat16)}


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    # Query heads h*G .. h*G+G-1 share KV head h (repeat_interleave order, as HF's repeat_kv).
    qf = q.float().view(b, hkv, hq // hkv, d)
    kf = k_cache.float().permute(0, 2, 3, 1)  # [B, HKV, D, L]
    vf = v_cache.float().permute(0, 2, 1, 3)  # [B, HKV, L, D]
    probs = torch.softmax((qf @ kf) * d**-0.5, dim=-1)  # [B, HKV, G, L]
    return (probs @ vf).reshape(b, hq, d).to(q.dtype)
