"""torch.compile of one sequence's GQA decode attention (float32 scores and softmax, a bf16 P @ V), compiled once
on the first call with the sequence's length marked dynamic; the loop over sequences and the page gathers
(as this folder's torch_eager makes them) stay eager.

Compiling the folder's whole torch_eager.run specialised on the lengths and page offsets (read on the host with
.tolist()), so every new batch recompiled, inside the timed window. Here the length is a dynamic size: one graph
for every length of 2 or more (a dynamic size specialises 0 and 1, so a sequence of one token runs the same
function uncompiled). The attention is written out (matmul, softmax, matmul) rather than SDPA, whose backend
choice at compile time could guard on the length.
"""

import torch

_compiled = None


def _sequence_kv(k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len):
    """Each sequence's keys and values [L, HKV, D], gathered from its pages, in batch order."""
    ps = k_cache.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        yield k_cache[idx].flatten(0, 1)[:length], v_cache[idx].flatten(0, 1)[:length]


def _attend(q, k, v, sm_scale):
    """One sequence: q [HQ, D] against its k, v [L, HKV, D] (query head h reads KV head h // (HQ / HKV))."""
    hkv, d = k.shape[1], k.shape[2]
    scores = torch.matmul(q.float().view(hkv, -1, d), k.float().permute(1, 2, 0)) * sm_scale  # [HKV, G, L]
    return torch.matmul(scores.softmax(-1).to(v.dtype), v.transpose(0, 1)).view(-1, d)


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_attend, dynamic=False)
    out = torch.empty_like(q)
    for b, (k, v) in enumerate(_sequence_kv(k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len)):
        attend = _attend if k.shape[0] < 2 else _compiled
        for t in (k, v):
            torch._dynamo.mark_dynamic(t, 0)
        out[b] = attend(q[b], k, v, sm_scale)
    return out
