"""Reference: causal GQA attention with a sink logit per head, in float32, in query chunks so long prompts fit."""

import torch

QUERY_SCALE = 2.0
SCORE_BUDGET = 2**28


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    group = hq // hkv
    qf = q.float().permute(0, 2, 1, 3).reshape(b, hkv, group, s, d)
    kf = k.float().permute(0, 2, 3, 1)[:, :, None]  # [B, HKV, 1, D, S]
    vf = v.float().permute(0, 2, 1, 3)[:, :, None]  # [B, HKV, 1, S, D]
    sink = sinks.float().view(1, hkv, group, 1, 1)
    out = torch.empty_like(qf)
    rows = max(1, SCORE_BUDGET // (b * hq * s))
    for start in range(0, s, rows):
        stop = min(s, start + rows)
        scores = (qf[:, :, :, start:stop] @ kf[..., :stop]) * d**-0.5
        future = torch.arange(start, stop, device=q.device)[:, None] < torch.arange(stop, device=q.device)[None, :]
        scores.masked_fill_(future, float("-inf"))
        full = torch.cat([scores, sink.expand(b, hkv, group, stop - start, 1)], dim=-1)
        out[:, :, :, start:stop] = torch.softmax(full, dim=-1)[..., :-1] @ vf[..., :stop, :]
    return out.reshape(b, hq, s, d).transpose(1, 2).contiguous().to(q.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    shape = (axes["B"], axes["S"], axes["HQ"], axes["D"])
    q = torch.randn(shape, generator=generator, device=device) * QUERY_SCALE
    sinks = torch.randn(axes["HQ"], generator=generator, device=device) + 2.0
    return {"q": q.to(torch.bfloat16), "sinks": sinks.to(torch.bfloat16)}
