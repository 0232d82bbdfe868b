"""Reference: windowed GQA decode with a sink logit per head, scores and softmax in float32, rounded once."""

import torch

QK_STD = 1.5


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sinks: torch.Tensor, window: int) -> torch.Tensor:
    b, hq, d = q.shape
    length, hkv = k_cache.shape[1], k_cache.shape[2]
    seen = slice(max(0, length - int(window)), length)
    qg = q.float().view(b, hkv, hq // hkv, d)
    scores = torch.einsum("bhgd,blhd->bhgl", qg, k_cache[:, seen].float()) * d**-0.5
    sink = sinks.float().view(1, hkv, hq // hkv, 1).expand(b, -1, -1, 1)
    probs = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]  # the sink takes mass, adds no value
    out = torch.einsum("bhgl,blhd->bhgd", probs, v_cache[:, seen].float())
    return out.reshape(b, hq, d).to(q.dtype)


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Peaked scores (q and k of std 1.5) and sink logits around 2, so the sink takes a real share."""
    b, d = axes["B"], axes["D"]
    q = torch.randn(b, axes["HQ"], d, generator=generator, device=device) * QK_STD
    k = torch.randn(b, axes["L"], axes["HKV"], d, generator=generator, device=device) * QK_STD
    sinks = torch.randn(axes["HQ"], generator=generator, device=device) + 2.0
    return {"q": q.to(torch.bfloat16), "k_cache": k.to(torch.bfloat16), "sinks": sinks.to(torch.bfloat16)}
