"""torch.compile of soft-capped GQA decode, compiled on the first call (static shapes)."""

import torch

SCALE = 256**-0.5  # query_pre_attn_scalar ** -0.5
_compiled = None


def _softcap_decode(q, k_cache, v_cache, softcap):
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache.transpose(1, 2).repeat_interleave(group, dim=1)
    v = v_cache.transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float().unsqueeze(2), k.float().transpose(2, 3)) * SCALE
    probs = (softcap * torch.tanh(scores / softcap)).softmax(dim=-1).to(q.dtype)
    return torch.matmul(probs, v).squeeze(2)


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, softcap: float) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_softcap_decode, dynamic=False)
    return _compiled(q, k_cache, v_cache, softcap)
