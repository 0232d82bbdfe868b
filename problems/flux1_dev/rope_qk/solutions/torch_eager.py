"""Straightforward PyTorch: FLUX's own code path (EmbedND rope table as 2x2 rotation matrices, apply_rope)."""

import torch

AXES_DIM = (16, 56, 56)
THETA = 10000


def _rope(pos: torch.Tensor, dim: int) -> torch.Tensor:
    scale = torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device) / dim
    omega = 1.0 / (THETA**scale)
    out = torch.einsum("n,d->nd", pos.to(torch.float64), omega)
    out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
    return out.reshape(*out.shape[:-1], 2, 2).float()


def run(q: torch.Tensor, k: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    freqs_cis = torch.cat([_rope(ids[:, i], d) for i, d in enumerate(AXES_DIM)], dim=-3)  # [S, D/2, 2, 2]
    xq = q.float().reshape(*q.shape[:-1], -1, 1, 2)
    xk = k.float().reshape(*k.shape[:-1], -1, 1, 2)
    q_out = freqs_cis[..., 0] * xq[..., 0] + freqs_cis[..., 1] * xq[..., 1]
    k_out = freqs_cis[..., 0] * xk[..., 0] + freqs_cis[..., 1] * xk[..., 1]
    return q_out.reshape(q.shape).type_as(q), k_out.reshape(k.shape).type_as(k)
