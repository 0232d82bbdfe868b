"""Reference: per expert, the rows routed to it times its weight, in float32, rounded once."""

import torch

ZIPF_EXPONENT = 1.0  # expert popularity ~ 1 / rank: a few hot experts, a long cold tail


def run(x, w13, topk_ids):
    t, k = topk_ids.shape
    flat = topk_ids.reshape(-1).long()
    rows = x.float().repeat_interleave(k, dim=0)  # row t*K + j is token t
    out = torch.empty(t * k, w13.shape[1], dtype=x.dtype, device=x.device)
    for e in torch.unique(flat).tolist():
        sel = (flat == e).nonzero()[:, 0]
        out[sel] = torch.matmul(rows[sel], w13[e].float().t()).to(x.dtype)
    return out.view(t, k, -1)


def make_inputs(axes, generator, device):
    t, e, k = axes["T"], axes["E"], axes["K"]
    popularity = (torch.arange(1, e + 1, device=device, dtype=torch.float32) ** -ZIPF_EXPONENT)
    popularity = popularity[torch.randperm(e, generator=generator, device=device)]
    ids = torch.multinomial(popularity.expand(t, e), k, replacement=False, generator=generator)
    # x and w13 stay standard normal (the default): only the routing is made here, so `sol` and `list`
    # find the touched experts without drawing the 800 MB of weights.
    return {"topk_ids": ids.to(torch.int32)}


def cost(axes, inputs):
    t, h, f2, k = axes["T"], axes["H"], axes["F2"], axes["K"]
    touched = int(torch.unique(inputs["topk_ids"]).numel())
    return {"flops": 2 * t * k * f2 * h,
            "bytes": t * h * 2 + touched * f2 * h * 2 + t * k * 4 + t * k * f2 * 2}
