"""Straightforward PyTorch: F.rms_norm per head in bfloat16, then rotate-half RoPE in float32."""

import torch
import torch.nn.functional as F


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def run(q: torch.Tensor, k: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
        cos: torch.Tensor, sin: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    d = q.shape[-1]
    q = F.rms_norm(q, (d,), q_norm_weight, eps)
    k = F.rms_norm(k, (d,), k_norm_weight, eps)
    return _rope(q, cos, sin), _rope(k, cos, sin)
