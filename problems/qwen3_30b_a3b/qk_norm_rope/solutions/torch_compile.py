"""torch.compile of q/k RMSNorm + RoPE in float32, compiled on the first call (static shapes)."""

import torch

_compiled = None


def _norm_rope_both(q, k, q_norm_weight, k_norm_weight, cos, sin, eps):
    def one(x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w.float()
        x1, x2 = xf.chunk(2, dim=-1)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)

    return one(q, q_norm_weight), one(k, k_norm_weight)


def run(q: torch.Tensor, k: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
        cos: torch.Tensor, sin: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_norm_rope_both, dynamic=False)
    return _compiled(q, k, q_norm_weight, k_norm_weight, cos, sin, eps)
