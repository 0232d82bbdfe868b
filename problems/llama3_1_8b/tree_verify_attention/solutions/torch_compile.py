"""torch.compile of one sequence's tree verification (its prefix and draft keys, the tree as a mask, float32
scores and softmax, a bf16 P @ V), compiled once on the first call with the key count marked dynamic; the loop
over sequences and the gathers (as this folder's torch_eager makes them) stay eager.

Compiling the folder's whole torch_eager.run specialised on the lengths and page offsets (read on the host with
.tolist()), so every new batch recompiled, inside the timed window. Here the key count is a dynamic size: one
graph for every count of 2 or more (a dynamic size specialises 0 and 1; a prefix of one token and a draft of
one would run the same function uncompiled). The attention is written out (matmul, masked softmax, matmul)
rather than SDPA, whose backend choice at compile time could guard on the mask's length.
"""

import torch

_compiled = None


def _sequence_kv_mask(k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask):
    """Per sequence in batch order: its keys and values [L+N, HKV, D] (the prefix pages, then the draft tokens)
    and what each draft token sees [N, L+N] (the whole prefix, then its tree ancestors and itself)."""
    ps, n = k_cache.shape[1], k_draft.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        idx = kv_indices[starts[b]:starts[b + 1]].long()
        yield (torch.cat([k_cache[idx].flatten(0, 1)[:length], k_draft[b]]),
               torch.cat([v_cache[idx].flatten(0, 1)[:length], v_draft[b]]),
               torch.cat([tree_mask.new_ones(n, length), tree_mask[b]], dim=1))


def _attend(q, k, v, allowed, sm_scale):
    """One sequence: q [N, HQ, D] against its k, v [S, HKV, D] where allowed [N, S] is set (query head h reads KV
    head h // (HQ / HKV))."""
    n, hq, d = q.shape
    hkv = k.shape[1]
    rows = q.float().view(n, hkv, hq // hkv, d).permute(1, 0, 2, 3).reshape(hkv, -1, d)  # (token, head) rows
    scores = (torch.matmul(rows, k.float().permute(1, 2, 0)) * sm_scale).view(hkv, n, hq // hkv, -1)
    probs = scores.masked_fill(~allowed[None, :, None, :], float("-inf")).softmax(-1).to(v.dtype)
    o = torch.matmul(probs.view(hkv, n * (hq // hkv), -1), v.transpose(0, 1))  # [HKV, N*G, D]
    return o.view(hkv, n, hq // hkv, d).permute(1, 0, 2, 3).reshape(n, hq, d)


def run(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_attend, dynamic=False)
    out = torch.empty_like(q)
    sequences = _sequence_kv_mask(k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len,
                                  tree_mask)
    for b, (k, v, allowed) in enumerate(sequences):
        attend = _attend if k.shape[0] < 2 else _compiled
        for t, dim in ((k, 0), (v, 0), (allowed, 1)):
            torch._dynamo.mark_dynamic(t, dim)
        out[b] = attend(q[b], k, v, allowed, sm_scale)
    return out
