"""Eager PyTorch: slice the window, repeat the KV heads, float32 scores with the sink column, bf16 p*v."""

import torch


def run(q, k_cache, v_cache, sinks, window):
    start = max(0, k_cache.shape[1] - int(window))
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)  # [B, HQ, W, D]
    v = v_cache[:, start:].transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float().unsqueeze(2), k.float().transpose(2, 3)) * q.shape[-1] ** -0.5  # [B, HQ, 1, W]
    sink = sinks.float().view(1, -1, 1, 1).expand(q.shape[0], -1, 1, 1)
    probs = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]
    return torch.matmul(probs.to(q.dtype), v).squeeze(2)
