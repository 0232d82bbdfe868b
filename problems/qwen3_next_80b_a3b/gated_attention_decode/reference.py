"""Reference: GQA decode in float32, times sigmoid(gate), rounded once."""

import torch

QK_STD = 1.2


def run(q, k_cache, v_cache, gate):
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    qg = q.float().view(b, hkv, hq // hkv, d)
    scores = torch.einsum("bhgd,blhd->bhgl", qg, k_cache.float()) * d**-0.5
    out = torch.einsum("bhgl,blhd->bhgd", scores.softmax(dim=-1), v_cache.float()).reshape(b, hq, d)
    return (out * torch.sigmoid(gate.float())).to(q.dtype)


def make_inputs(axes, generator, device):
    b, d = axes["B"], axes["D"]
    q = torch.randn(b, axes["HQ"], d, generator=generator, device=device) * QK_STD
    k = torch.randn(b, axes["L"], axes["HKV"], d, generator=generator, device=device) * QK_STD
    return {"q": q.to(torch.bfloat16), "k_cache": k.to(torch.bfloat16)}
