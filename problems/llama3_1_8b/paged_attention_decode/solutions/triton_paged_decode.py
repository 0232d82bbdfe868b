"""Triton split-KV (flash-decoding) GQA attention over a paged KV cache, for any page size.

Skewed batches defeat one program per sequence (the longest sequence sets the time) and a fixed
number of splits per sequence (the short ones idle). Each sequence is cut instead into chunks of
CHUNK tokens; the chunks of the whole batch form one work list, built on the device with no host
synchronisation (its length is bounded by the page count the shapes give). A program takes one
chunk of one KV head and its 4 query heads (padded to 16 rows for tl.dot), walks the chunk's tokens
through the page table, and writes a partial output with its log-sum-exp; a second kernel merges
each sequence's partials.
"""

import torch
import triton
import triton.language as tl

GROUP_PAD = 16  # tl.dot's smallest M


@triton.jit
def _partial_kernel(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last, work_seq, work_chunk,
                    part_o, part_lse, sm_scale, PS,
                    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, CHUNK: tl.constexpr,
                    BLOCK_N: tl.constexpr, GP: tl.constexpr):
    w = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.load(work_seq + w)
    if b >= 0:
        group: tl.constexpr = HQ // HKV
        c = tl.load(work_chunk + w)
        p0 = tl.load(kv_indptr + b)
        p1 = tl.load(kv_indptr + b + 1)
        length = (p1 - p0 - 1) * PS + tl.load(kv_last + b)
        start = c * CHUNK
        end = tl.minimum(start + CHUNK, length)
        rows = tl.arange(0, GP)
        dd = tl.arange(0, D)
        row_ok = rows < group
        qv = tl.load(q + (b * HQ + h * group + rows)[:, None] * D + dd[None, :], mask=row_ok[:, None], other=0.0)
        m = tl.full([GP], float("-inf"), tl.float32)
        s_sum = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        for t0 in range(start, end, BLOCK_N):
            t = t0 + tl.arange(0, BLOCK_N)
            t_ok = t < end
            page = tl.load(kv_indices + p0 + t // PS, mask=t_ok, other=0).to(tl.int64)
            row = ((page * PS + t % PS) * HKV + h) * D
            k = tl.load(k_cache + row[:, None] + dd[None, :], mask=t_ok[:, None], other=0.0)
            s = tl.dot(qv, tl.trans(k)) * sm_scale
            s = tl.where(t_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            s_sum = s_sum * alpha + tl.sum(p, 1)
            v = tl.load(v_cache + row[:, None] + dd[None, :], mask=t_ok[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        heads = h * group + rows
        tl.store(part_o + (w * HQ + heads)[:, None] * D + dd[None, :], acc / s_sum[:, None], mask=row_ok[:, None])
        tl.store(part_lse + w * HQ + heads, m + tl.log(s_sum), mask=row_ok)


@triton.jit
def _merge_kernel(part_o, part_lse, first_work, n_chunks, out, HQ: tl.constexpr, D: tl.constexpr):
    b = tl.program_id(0)
    hq = tl.program_id(1)
    w0 = tl.load(first_work + b)
    n = tl.load(n_chunks + b)
    dd = tl.arange(0, D)
    m = float("-inf")
    for i in range(0, n):
        m = tl.maximum(m, tl.load(part_lse + (w0 + i) * HQ + hq))
    total = 0.0
    acc = tl.zeros([D], tl.float32)
    for i in range(0, n):
        scale = tl.exp(tl.load(part_lse + (w0 + i) * HQ + hq) - m)
        total += scale
        acc += scale * tl.load(part_o + ((w0 + i) * HQ + hq) * D + dd)
    tl.store(out + (b * HQ + hq) * D + dd, (acc / total).to(out.dtype.element_ty))


def chunk_tokens(max_tokens: int, kv_heads: int, num_sms: int = 132) -> int:
    """Tokens per chunk: about 4 programs per SM if the batch were one sequence, 64 to 1024."""
    target = max(1, max_tokens * kv_heads // (4 * num_sms))
    return min(1024, max(64, triton.next_power_of_2(target)))


def work_list(kv_indptr, kv_last_page_len, page_size: int, chunk: int, bound: int):
    """(sequence, chunk) per work item, -1 past the end; each sequence's first item and chunk count."""
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    lengths = (pages - 1) * page_size + kv_last_page_len.long()
    n_chunks = (lengths + chunk - 1) // chunk
    ends = n_chunks.cumsum(0)
    first = ends - n_chunks
    ids = torch.arange(bound, device=kv_indptr.device)
    seq = torch.searchsorted(ends, ids, right=True)
    valid = seq < len(n_chunks)
    seq_c = seq.clamp(max=len(n_chunks) - 1)
    work_seq = torch.where(valid, seq_c, -1).to(torch.int32)
    work_chunk = (ids - first[seq_c]).to(torch.int32)
    return work_seq, work_chunk, first.to(torch.int32), n_chunks.to(torch.int32)


def paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                 chunk: int | None = None, block_n: int = 64, num_warps: int = 4):
    batch, hq, d = q.shape
    pool, ps, hkv, _ = k_cache.shape
    max_tokens = kv_indices.shape[0] * ps  # no sequence is longer than all the pages
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    chunk = chunk or chunk_tokens(max_tokens, hkv, sms)
    bound = -(-max_tokens // chunk) + batch  # sum of ceil(L_i / chunk) <= sum L_i / chunk + B
    work_seq, work_chunk, first, n_chunks = work_list(kv_indptr, kv_last_page_len, ps, chunk, bound)
    part_o = torch.empty(bound, hq, d, device=q.device, dtype=torch.float32)
    part_lse = torch.empty(bound, hq, device=q.device, dtype=torch.float32)
    _partial_kernel[(bound, hkv)](q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, work_seq, work_chunk,
                                  part_o, part_lse, sm_scale, ps, HQ=hq, HKV=hkv, D=d, CHUNK=chunk,
                                  BLOCK_N=min(block_n, chunk), GP=max(GROUP_PAD, hq // hkv), num_warps=num_warps)
    out = torch.empty_like(q)
    _merge_kernel[(batch, hq)](part_o, part_lse, first, n_chunks, out, HQ=hq, D=d)
    return out


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    return paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale)
