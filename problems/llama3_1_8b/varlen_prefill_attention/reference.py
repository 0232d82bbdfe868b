"""Reference: causal GQA attention per packed sequence, float32 scores and softmax, in blocks of query rows."""

import torch

LENGTH_SIGMA = 1.0
ROWS = 512  # query rows per step: keeps the float32 scores of a 16k-token prompt within a few hundred MB


def _attend(q, k, v, sm_scale):
    """One sequence: q [L, HQ, D], k/v [L, HKV, D] -> [L, HQ, D] (float32)."""
    length, hq, d = q.shape
    hkv = k.shape[1]
    kt = k.float().permute(1, 2, 0)  # [HKV, D, L]
    vt = v.float().transpose(0, 1)  # [HKV, L, D]
    out = torch.empty(length, hq, d, dtype=torch.float32, device=q.device)
    for r0 in range(0, length, ROWS):
        r1 = min(length, r0 + ROWS)
        qb = q[r0:r1].float().permute(1, 0, 2).reshape(hkv, (hq // hkv) * (r1 - r0), d)  # heads 4h..4h+3 share h
        s = torch.matmul(qb, kt[:, :, :r1]).view(hkv, hq // hkv, r1 - r0, r1) * sm_scale
        rows = torch.arange(r0, r1, device=q.device)[:, None]
        s = s.masked_fill(torch.arange(r1, device=q.device)[None, :] > rows, float("-inf"))
        p = s.softmax(-1).view(hkv, -1, r1)
        out[r0:r1] = torch.matmul(p, vt[:, :r1]).view(hq, r1 - r0, d).transpose(0, 1)
    return out


def run(q, k, v, cu_seqlens, sm_scale):
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for a, b in zip(bounds, bounds[1:], strict=False):
        out[a:b] = _attend(q[a:b], k[a:b], v[a:b], sm_scale).to(q.dtype)
    return out


def skewed_split(total, parts, generator, device):
    """``parts`` lengths >= 1 summing to ``total``, log-normally skewed."""
    weights = (torch.randn(parts, generator=generator, device=device) * LENGTH_SIGMA).exp()
    counts = torch.ones(parts, dtype=torch.long, device=device)
    if total > parts:
        counts += torch.bincount(torch.multinomial(weights, total - parts, replacement=True, generator=generator),
                                 minlength=parts)
    return counts


def make_inputs(axes, generator, device):
    cu = torch.zeros(axes["B"] + 1, dtype=torch.int32, device=device)
    cu[1:] = skewed_split(axes["T"], axes["B"], generator, device).cumsum(0)
    return {"cu_seqlens": cu}


def cost(axes, inputs):
    lengths = (inputs["cu_seqlens"][1:] - inputs["cu_seqlens"][:-1]).long()
    pairs = int((lengths * (lengths + 1) // 2).sum())
    t, hq, hkv, d = axes["T"], axes["HQ"], axes["HKV"], axes["D"]
    return {"flops": 4 * d * hq * pairs, "bytes": 2 * t * d * (2 * hq + 2 * hkv) + 4 * axes["B1"]}
