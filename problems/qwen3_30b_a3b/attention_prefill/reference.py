"""Reference: causal GQA attention with explicit float32 scores and mask, one head at a time, rounded once."""

import torch

# q and k are drawn with this standard deviation so scores have std ~2.25: the softmax is neither
# flat (output ~ 0, so a wrong kernel could pass) nor one-hot (so the p*v sum matters).
QK_STD = 1.5


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, s, hq, d = q.shape
    group = hq // k.shape[2]
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    out = torch.empty_like(q)
    # One (sequence, query head) at a time keeps the float32 score matrix at S*S (1 GiB at 16k).
    for bi in range(b):
        for h in range(hq):
            qh = q[bi, :, h].float()
            kh = k[bi, :, h // group].float()
            vh = v[bi, :, h // group].float()
            scores = (qh @ kh.t()) * d**-0.5
            probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
            out[bi, :, h] = (probs @ vh).to(q.dtype)
    return out


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    b, s, d = axes["B"], axes["S"], axes["D"]
    q = torch.randn(b, s, axes["HQ"], d, generator=generator, device=device) * QK_STD
    k = torch.randn(b, s, axes["HKV"], d, generator=generator, device=device) * QK_STD
    return {"q": q.to(torch.bfloat16), "k": k.to(torch.bfloat16)}
