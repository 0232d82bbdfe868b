"""torch.compile of one sequence's absorbed-MLA decode (float32 scores and softmax, a bf16 P @ V), compiled once
on the first call with the sequence's length marked dynamic; the loop over sequences and the page gathers
(as this folder's torch_eager makes them) stay eager.

Compiling the folder's whole torch_eager.run specialised on the lengths and page offsets (read on the host with
.tolist()), so every new batch recompiled, inside the timed window. Here the length is a dynamic size: one graph
for every length of 2 or more (a dynamic size specialises 0 and 1, so a sequence of one token runs the same
function uncompiled).
"""

import torch

ROPE_DIMS = 64
_compiled = None


def _sequence_rows(kv_cache, kv_indptr, kv_indices, kv_last_page_len):
    """Each sequence's latent rows [L, CR] (bf16), gathered from its pages, in batch order."""
    ps = kv_cache.shape[1]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = ((pages - 1) * ps + kv_last_page_len.long()).tolist()
    starts = kv_indptr.tolist()
    for b, length in enumerate(lengths):
        yield kv_cache[kv_indices[starts[b]:starts[b + 1]].long()].flatten(0, 1)[:length]


def _attend(q, rows, softmax_scale):
    """One sequence: q [H, CR] against its latent rows [L, CR]; the values are the rows' first C columns."""
    scores = torch.matmul(q.float(), rows.float().t()) * softmax_scale
    return torch.matmul(scores.softmax(-1).to(q.dtype), rows[:, :q.shape[-1] - ROPE_DIMS])


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_attend, dynamic=False)
    out = torch.empty(*q.shape[:2], q.shape[-1] - ROPE_DIMS, dtype=q.dtype, device=q.device)
    for b, rows in enumerate(_sequence_rows(kv_cache, kv_indptr, kv_indices, kv_last_page_len)):
        attend = _attend if rows.shape[0] < 2 else _compiled
        torch._dynamo.mark_dynamic(rows, 0)
        out[b] = attend(q[b], rows, softmax_scale)
    return out
