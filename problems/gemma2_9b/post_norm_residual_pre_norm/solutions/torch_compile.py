"""torch.compile of norm + add + norm (one fused kernel per row), compiled on the first call."""

import torch

_compiled = None


def _sandwich(x, residual, post_weight, pre_weight, eps):
    def norm(v, w):
        vf = v.float()
        return vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w.float())

    stream = (residual.float() + norm(x, post_weight)).to(x.dtype)
    return norm(stream, pre_weight).to(x.dtype), stream


def run(x: torch.Tensor, residual: torch.Tensor, post_weight: torch.Tensor, pre_weight: torch.Tensor,
        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_sandwich, dynamic=False)
    return _compiled(x, residual, post_weight, pre_weight, eps)
