"""Reference: temperature, then top-k, then top-p, then inverse-CDF sampling in token-id order, in float64.

The sample is a function of the logits, ``u`` and the three scalars (see problem.yaml for the exact
definition and its tie rule); nothing is random inside ``run``.
"""

import torch

ZIPF_LOW, ZIPF_HIGH = 1.0, 2.0  # per row: exponent of the power law the sorted probabilities follow
LOGIT_OFFSET = -5.0  # logits of a trained lm_head sit around [-10, 25]; softmax does not see the shift


def kept_tokens(logits, top_k, top_p, temperature):
    """Token ids kept per row, in the ranking order (value descending, lower id first), and their
    renormalised float64 probabilities (0 for those top-p dropped)."""
    vocab = logits.shape[-1]
    k = vocab if top_k <= 0 else min(int(top_k), vocab)
    values, ids = torch.sort(logits.double(), dim=-1, descending=True, stable=True)  # stable: ties by id
    p = torch.softmax(values[:, :k] / temperature, dim=-1)
    if top_p < 1.0:
        before = p.cumsum(-1) - p  # mass strictly before each token in the ranking
        p = torch.where(before < top_p, p, torch.zeros_like(p))
    return ids[:, :k], p / p.sum(-1, keepdim=True)


def run(logits, u, top_k, top_p, temperature):
    ids, p = kept_tokens(logits, top_k, top_p, temperature)
    by_id, perm = torch.sort(ids, dim=-1)  # token-id order for the inverse CDF
    cdf = p.gather(-1, perm).cumsum(-1)
    pos = torch.searchsorted(cdf, (u.double() * cdf[:, -1]).unsqueeze(-1), right=True)  # first cdf > u * total
    pos = pos.clamp(max=ids.shape[-1] - 1)
    return by_id.gather(-1, pos).squeeze(-1).to(torch.int32)


def make_inputs(axes, generator, device):
    b, v = axes["B"], axes["V"]
    # i.i.d. exponential logits scaled by s: the sorted probabilities follow a power law of exponent s
    # (Zipf), from flat (s = 1, top token ~10%) to peaked (s = 2, top token ~60%), one s per row.
    s = ZIPF_LOW + (ZIPF_HIGH - ZIPF_LOW) * torch.rand(b, 1, generator=generator, device=device)
    e = torch.empty(b, v, device=device).exponential_(generator=generator)
    logits = (s * e + LOGIT_OFFSET).to(torch.bfloat16).float()  # the lm_head's bf16 output, upcast: ties occur
    return {"logits": logits, "u": torch.rand(b, generator=generator, device=device)}


def cost(axes, inputs):
    b, v = axes["B"], axes["V"]
    top_k = int(inputs["top_k"])
    k = v if top_k <= 0 else min(top_k, v)
    # One comparison per logit to select the top k, then per kept candidate: the temperature division,
    # exp, the softmax sum, the top-p prefix sum and its compare, the token-order prefix sum.
    return {"flops": b * (v + 6 * k), "bytes": b * v * 4 + b * 4 + b * 4}
