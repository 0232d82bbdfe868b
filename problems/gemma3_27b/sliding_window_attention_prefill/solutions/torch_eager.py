"""Eager PyTorch: SDPA (GQA) with a boolean band mask, one block of W queries at a time against the 2W - 1 keys
its band can reach (a whole-prompt mask would be S^2 and the math fallback S^2 per head)."""

import torch
import torch.nn.functional as F

SCALE = 168**-0.5


def run(q, k, v, window):
    s, w = q.shape[1], int(window)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D]
    parts = []
    for a in range(0, s, w):
        stop, first = min(s, a + w), max(0, a - w + 1)
        i = torch.arange(a, stop, device=q.device)[:, None]
        j = torch.arange(first, stop, device=q.device)[None, :]
        band = (j <= i) & (j > i - w)
        parts.append(F.scaled_dot_product_attention(qt[:, :, a:stop], kt[:, :, first:stop], vt[:, :, first:stop],
                                                    attn_mask=band, scale=SCALE, enable_gqa=True))
    return torch.cat(parts, dim=2).transpose(1, 2)
