"""torch.compile of one prompt's causal GQA attention (SDPA), compiled once on the first call with the prompt's
length marked dynamic; the loop over the packed prompts stays eager.

Compiling this folder's whole torch_eager.run specialised on cu_seqlens (read on the host with .tolist()), so
every new batch recompiled, inside the timed window. Here a prompt's length is a dynamic size: one graph for
every length of 2 or more (a dynamic size specialises 0 and 1, so a prompt of one token runs the same function
uncompiled).
"""

import torch
import torch.nn.functional as F

_compiled = None


def _attend(q, k, v, sm_scale):
    """One prompt: q [L, HQ, D], k and v [L, HKV, D], causal, to [L, HQ, D]."""
    o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                                       scale=sm_scale, enable_gqa=True)
    return o.transpose(0, 1)


def run(q, k, v, cu_seqlens, sm_scale):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_attend, dynamic=False)
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for a, b in zip(bounds, bounds[1:], strict=False):
        attend = _attend if b - a < 2 else _compiled
        prompt = [q[a:b], k[a:b], v[a:b]]
        for t in prompt:
            torch._dynamo.mark_dynamic(t, 0)
        out[a:b] = attend(*prompt, sm_scale)
    return out
