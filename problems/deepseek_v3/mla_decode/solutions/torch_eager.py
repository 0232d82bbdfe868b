"""Straightforward PyTorch: float32 scores against the whole latent cache, softmax, then a bfloat16
matmul of the probabilities with the latent part of the cache."""

import torch

ROPE_DIMS = 64  # qk_rope_head_dim: the tail of each q / cache row

def run(q: torch.Tensor, kv_cache: torch.Tensor, softmax_scale: float) -> torch.Tensor:
    latent = q.shape[-1] - ROPE_DIMS
    scores = torch.matmul(q.float(), kv_cache.float().transpose(1, 2)) * softmax_scale
    probs = scores.softmax(dim=-1).to(q.dtype)
    return torch.matmul(probs, kv_cache[..., :latent])
