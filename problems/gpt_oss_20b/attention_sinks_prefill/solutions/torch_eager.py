"""Eager PyTorch: SDPA returns the attention and its log-sum-exp is rebuilt from the scores in query chunks, so the
sink's share can be taken out: out * exp(lse) / (exp(lse) + exp(sink))."""

import torch
import torch.nn.functional as F

CHUNK = 1024


def _lse(q, k, start, stop):
    """log-sum-exp of the causal scores of query rows start..stop ([B, HQ, rows], float32)."""
    scores = torch.matmul(q[:, :, start:stop].float(), k[:, :, :stop].float().transpose(2, 3)) * q.shape[-1] ** -0.5
    future = torch.arange(start, stop, device=q.device)[:, None] < torch.arange(stop, device=q.device)[None, :]
    return scores.masked_fill_(future, float("-inf")).logsumexp(dim=-1)


def run(q, k, v, sinks):
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D]
    group = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).float()
    s = qt.shape[2]
    lse = torch.cat([_lse(qt, kt, a, min(s, a + CHUNK)) for a in range(0, s, CHUNK)], dim=-1)  # [B, HQ, S]
    keep = torch.sigmoid(lse - sinks.float().view(1, -1, 1))  # exp(lse) / (exp(lse) + exp(sink))
    return (out * keep.unsqueeze(-1)).to(q.dtype).transpose(1, 2)
