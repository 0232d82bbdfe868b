"""Straightforward PyTorch: F.rms_norm per head and rotate-half RoPE, both in float32, rounded to bfloat16 once.

HF's path rounds the norm's output to bfloat16 before RoPE: where RoPE's two terms cancel, that rounding
(up to half a bf16 ulp of |x|, ~0.06 at |x| = 16) is most of the result; at 16K tokens a few elements in
67M then miss the tolerance (H200 and CPU, 2026-12-02). Rounding once meets it, as a fused kernel does.
"""

import torch
import torch.nn.functional as F


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def run(q: torch.Tensor, k: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
        cos: torch.Tensor, sin: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    d = q.shape[-1]
    qn = F.rms_norm(q.float(), (d,), q_norm_weight.float(), eps)
    kn = F.rms_norm(k.float(), (d,), k_norm_weight.float(), eps)
    return _rope(qn, cos, sin).to(q.dtype), _rope(kn, cos, sin).to(k.dtype)
