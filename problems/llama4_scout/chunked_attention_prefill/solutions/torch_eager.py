"""Eager PyTorch: SDPA (causal, GQA) once per chunk."""

import torch
import torch.nn.functional as F


def run(q, k, v, chunk):
    c = int(chunk)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D]
    parts = [F.scaled_dot_product_attention(qt[:, :, a:a + c], kt[:, :, a:a + c], vt[:, :, a:a + c], is_causal=True,
                                            enable_gqa=True) for a in range(0, qt.shape[2], c)]
    return torch.cat(parts, dim=2).transpose(1, 2)
