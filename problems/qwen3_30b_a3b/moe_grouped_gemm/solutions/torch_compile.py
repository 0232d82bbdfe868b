"""torch.compile of the routing (sort the (token, expert) pairs by expert, count each expert's rows, gather the
rows in that order: one graph of static shapes), compiled once on the first call; the per-expert matmuls and
the scatter back stay eager.

Compiling this folder's whole torch_eager.run specialised on the expert counts (read on the host with .tolist()),
so every new routing recompiled, inside the timed window. The routing's shapes depend on T, K and E only; a
matmul's row count is an expert's count, a value, so the loop over experts runs eager (Inductor would call the
same aten mm for each).
"""

import torch

_compiled = None


def _route(x, topk_ids, experts: int):
    """The pairs' order by expert (stable), each expert's row count, and the rows of x in that order."""
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    # a one-hot sum, not bincount: bincount's length depends on the values (static shapes compile once)
    counts = (flat[:, None] == torch.arange(experts, device=flat.device)).sum(0)
    return order, counts, x[order // topk_ids.shape[1]]


def run(x, w13, topk_ids):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_route, dynamic=False)
    t, k = topk_ids.shape
    order, counts, rows = _compiled(x, topk_ids, w13.shape[0])
    out = torch.empty(t * k, w13.shape[1], dtype=x.dtype, device=x.device)
    start = 0
    for e, n in enumerate(counts.tolist()):
        if n:
            out[order[start:start + n]] = rows[start:start + n] @ w13[e].t()
            start += n
    return out.view(t, k, -1)
