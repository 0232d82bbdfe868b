"""torch.compile of windowed GQA decode (slice + SDPA), compiled on the first call (static shapes)."""

import torch
import torch.nn.functional as F

_compiled = None


def _window_decode(q, k_cache, v_cache, window):
    start = max(0, k_cache.shape[1] - window)
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)
    v = v_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v).squeeze(2)


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, window: int) -> torch.Tensor:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_window_decode, dynamic=False)
    return _compiled(q, k_cache, v_cache, window)
