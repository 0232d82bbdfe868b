"""Triton top-k / top-p sampling without sorting the vocabulary: a per-chunk top-k, then one program
per row on the few candidates.

Each logit becomes one int64 key: its float32 bits made order-preserving in the high word, and
2^31 - 1 - id in the low word, so that sorting keys descending ranks by value and breaks ties by the
lower id, exactly the problem's ranking. The first kernel takes the KC = next_pow2(top_k) largest
keys of each chunk of CHUNK logits (every member of the row's top k is among its chunk's top KC),
reading the logits once, over B x V/CHUNK programs. The second kernel takes the row's top k of those
candidates, computes the softmax, the top-p cut on the ranking order, and the inverse CDF in
token-id order (candidates re-sorted by id), in float32. top_k <= 0 (disabled) or above 1024 falls
back to the sort of the eager candidate: the kept set is then not small.
"""

import torch
import triton
import triton.language as tl

import solbench

MAX_K = 1024
LOW = tl.constexpr(2147483647)  # 2^31 - 1: the low word is LOW - id (a constexpr: a jitted function reads it)
_eager = solbench.load_sibling(__file__, "torch_eager.py").run


@triton.jit
def _low_word(key):
    return key - ((key >> 32) << 32)


@triton.jit
def _chunk_topk_kernel(logits, cand, V, NCHUNK, CHUNK: tl.constexpr, KC: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1)
    ids = c * CHUNK + tl.arange(0, CHUNK)
    ok = ids < V
    x = tl.load(logits + b.to(tl.int64) * V + ids, mask=ok, other=float("-inf"))
    bits = x.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # int32 order == float order
    key = (ordered.to(tl.int64) << 32) + ((-ids).to(tl.int64) + LOW)  # tensor first: the interpreter's constexpr - tensor is a constexpr
    top = tl.topk(key, KC)
    tl.store(cand + (b * NCHUNK + c).to(tl.int64) * KC + tl.arange(0, KC), top)


@triton.jit
def _sample_kernel(cand, u, out, top_k, top_p, temperature, NC: tl.constexpr, KC: tl.constexpr):
    b = tl.program_id(0)
    keys = tl.load(cand + b.to(tl.int64) * NC + tl.arange(0, NC))
    top = tl.sort(tl.topk(keys, KC), descending=True)  # the row's ranking, first KC
    rank = tl.arange(0, KC)
    ordered = (top >> 32).to(tl.int32)
    x = tl.where(ordered >= 0, ordered, ordered ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)
    ids = (-_low_word(top) + LOW).to(tl.int32)
    kept = rank < top_k
    z = x / temperature
    z_max = tl.max(tl.where(kept, z, float("-inf")), 0)
    p = tl.where(kept, tl.exp(z - z_max), 0.0)
    total = tl.sum(p, 0)
    kept = kept & (tl.cumsum(p, 0) - p < top_p * total)  # mass strictly before, in ranking order
    p = tl.where(kept, p, 0.0)
    # Inverse CDF in token-id order: sort (id, p) by id; dropped candidates go last with p = 0.
    by_id = tl.sort((tl.where(kept, ids, 1 << 30).to(tl.int64) << 32) + p.to(tl.int32, bitcast=True).to(tl.int64))
    p_id = _low_word(by_id).to(tl.int32).to(tl.float32, bitcast=True)
    cdf = tl.cumsum(p_id, 0)
    target = tl.load(u + b) * tl.sum(p_id, 0)
    pos = tl.min(tl.where(cdf > target, rank, KC), 0)
    pos = tl.minimum(pos, tl.sum(kept.to(tl.int32), 0) - 1)  # rounding: u * total at the very top
    token = tl.sum(tl.where(rank == pos, (by_id >> 32).to(tl.int32), 0), 0)
    tl.store(out + b, token)


def sample(logits, u, top_k, top_p, temperature, chunk: int = 4096, num_warps: int = 8):
    batch, vocab = logits.shape
    k = min(int(top_k), vocab)
    kc = triton.next_power_of_2(k)
    chunk = max(kc, min(chunk, triton.next_power_of_2(vocab)))
    n_chunks = triton.cdiv(vocab, chunk)
    cand = torch.empty(batch, n_chunks * kc, dtype=torch.int64, device=logits.device)
    _chunk_topk_kernel[(batch, n_chunks)](logits, cand, vocab, n_chunks, CHUNK=chunk, KC=kc, num_warps=num_warps)
    out = torch.empty(batch, dtype=torch.int32, device=logits.device)
    nc = triton.next_power_of_2(n_chunks * kc)
    if nc != n_chunks * kc:  # tl.arange needs a power of two: pad with keys below any logit
        cand = torch.cat([cand, cand.new_full((batch, nc - n_chunks * kc), -(2**63))], dim=1)
    _sample_kernel[(batch,)](cand, u, out, k, top_p if top_p < 1.0 else 2.0, temperature, NC=nc, KC=kc,
                             num_warps=num_warps)
    return out


def run(logits, u, top_k, top_p, temperature):
    if top_k <= 0 or top_k > MAX_K:
        return _eager(logits, u, top_k, top_p, temperature)
    return sample(logits, u, top_k, top_p, temperature)
