"""Eager PyTorch: the recurrent step of fla's fused_recurrent_gated_delta_rule, in float32."""

import torch
import torch.nn.functional as F


def run(q, k, v, g, beta, state):
    group = v.shape[1] // k.shape[1]
    qf = F.normalize(q.float(), dim=-1, eps=1e-6).repeat_interleave(group, dim=1) * q.shape[-1] ** -0.5
    kf = F.normalize(k.float(), dim=-1, eps=1e-6).repeat_interleave(group, dim=1)
    s = state * g.exp()[..., None, None]
    delta = (v.float() - torch.einsum("bhk,bhkv->bhv", kf, s)) * beta[..., None]
    s = s + kf.unsqueeze(-1) * delta.unsqueeze(-2)
    return torch.einsum("bhk,bhkv->bhv", qf, s).to(v.dtype), s
