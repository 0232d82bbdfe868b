"""Straightforward PyTorch (as HF's eager Gemma-2 attention): repeat the KV heads, float32 scores,
tanh cap, softmax, bfloat16 p*v."""

import torch

SCALE = 256**-0.5  # query_pre_attn_scalar ** -0.5


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, softcap: float) -> torch.Tensor:
    group = q.shape[1] // k_cache.shape[2]
    k = k_cache.transpose(1, 2).repeat_interleave(group, dim=1)  # [B, HQ, L, D]
    v = v_cache.transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float().unsqueeze(2), k.float().transpose(2, 3)) * SCALE
    probs = (softcap * torch.tanh(scores / softcap)).softmax(dim=-1).to(q.dtype)
    return torch.matmul(probs, v).squeeze(2)
