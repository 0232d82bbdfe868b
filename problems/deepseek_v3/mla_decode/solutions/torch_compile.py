"""torch.compile of the absorbed-MLA decode (float32 scores, bfloat16 p*v), compiled on the first call."""

import torch

ROPE_DIMS = 64  # qk_rope_head_dim: the tail of each q / cache row
_compiled = None


def _mla(q, kv_cache, softmax_scale):
    latent = q.shape[-1] - ROPE_DIMS
    scores = torch.matmul(q.float(), kv_cache.float().transpose(1, 2)) * softmax_scale
    return torch.matmul(scores.softmax(dim=-1).to(q.dtype), kv_cache[..., :latent])


def run(q: torch.Tensor, kv_cache: torch.Tensor, softmax_scale: float) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_mla, dynamic=False)
    return _compiled(q, kv_cache, softmax_scale)
