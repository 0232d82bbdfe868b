"""Eager PyTorch: the recurrent step of fla's fused_recurrent_gated_delta_rule, in float32."""

import torch


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    """fla's l2norm: x / sqrt(sum(x^2) + eps), eps inside the root (F.normalize divides by max(|x|, eps),
    which differs 1000x for |x| ~ 1e-15)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def run(q, k, v, g, beta, state):
    group = v.shape[1] // k.shape[1]
    qf = _l2norm(q.float()).repeat_interleave(group, dim=1) * q.shape[-1] ** -0.5
    kf = _l2norm(k.float()).repeat_interleave(group, dim=1)
    s = state * g.exp()[..., None, None]
    delta = (v.float() - torch.einsum("bhk,bhkv->bhv", kf, s)) * beta[..., None]
    s = s + kf.unsqueeze(-1) * delta.unsqueeze(-2)
    return torch.einsum("bhk,bhkv->bhv", qf, s).to(v.dtype), s
