"""Reference: banded causal GQA attention in float32, each query slice against the keys of its band only."""

import torch

QUERY_SCALE = 2.0
SCALE = 168**-0.5  # query_pre_attn_scalar ** -0.5
ROWS = 512


def run(q, k, v, window):
    b, s, hq, d = q.shape
    hkv, w = k.shape[2], int(window)
    qf = q.float().permute(0, 2, 1, 3).reshape(b, hkv, hq // hkv, s, d)
    kf = k.float().permute(0, 2, 3, 1)[:, :, None]
    vf = v.float().permute(0, 2, 1, 3)[:, :, None]
    out = torch.empty_like(qf)
    for start in range(0, s, ROWS):
        stop, first = min(s, start + ROWS), max(0, start - w + 1)
        scores = (qf[:, :, :, start:stop] @ kf[..., first:stop]) * SCALE
        i = torch.arange(start, stop, device=q.device)[:, None]
        j = torch.arange(first, stop, device=q.device)[None, :]
        scores.masked_fill_((j > i) | (j <= i - w), float("-inf"))
        out[:, :, :, start:stop] = torch.softmax(scores, dim=-1) @ vf[..., first:stop, :]
    return out.reshape(b, hq, s, d).transpose(1, 2).contiguous().to(q.dtype)


def make_inputs(axes, generator, device):
    shape = (axes["B"], axes["S"], axes["HQ"], axes["D"])
    q = torch.randn(shape, generator=generator, device=device) * QUERY_SCALE
    return {"q": q.to(torch.bfloat16)}
