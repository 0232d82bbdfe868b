"""Triton split-KV attention for speculative tree verification over a paged prefix.

Each sequence's keys are seen as one virtual row of L + N positions: its L prefix tokens (through the
page table) followed by its N draft tokens (k_draft, v_draft). The virtual rows of the whole batch are
cut into chunks of CHUNK positions that form one work list built on the device (no host sync; its
length is bounded by what the shapes give), so a skewed batch keeps every SM busy. A program takes
one chunk, one KV head and a block of TB draft tokens times its 4 query heads (TB * 4 rows for
tl.dot), walks the chunk with an online softmax, masking draft keys by the tree (prefix keys are
seen by every draft token), and writes a partial output with its log-sum-exp; a second kernel merges
each sequence's partials. A row whose chunk holds no key it may see writes an empty partial.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_kernel(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last, tree_mask,
                    work_seq, work_chunk, part_o, part_lse, sm_scale, PS, N,
                    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, CHUNK: tl.constexpr,
                    BLOCK_N: tl.constexpr, TB: tl.constexpr):
    w = tl.program_id(0)
    h = tl.program_id(1)
    tb = tl.program_id(2)
    b = tl.load(work_seq + w)
    if b >= 0:
        group: tl.constexpr = HQ // HKV
        p0 = tl.load(kv_indptr + b)
        length = (tl.load(kv_indptr + b + 1) - p0 - 1) * PS + tl.load(kv_last + b)
        start = tl.load(work_chunk + w) * CHUNK
        end = tl.minimum(start + CHUNK, length + N)
        rows = tl.arange(0, TB * group)
        tok = tb * TB + rows // group  # draft token of each row
        head = h * group + rows % group
        row_ok = tok < N
        dd = tl.arange(0, D)
        q_off = ((b * N + tok).to(tl.int64) * HQ + head) * D
        qv = tl.load(q + q_off[:, None] + dd[None, :], mask=row_ok[:, None], other=0.0)
        m = tl.full([TB * group], float("-inf"), tl.float32)
        s_sum = tl.zeros([TB * group], tl.float32)
        acc = tl.zeros([TB * group, D], tl.float32)
        for t0 in range(start, end, BLOCK_N):
            t = t0 + tl.arange(0, BLOCK_N)
            in_prefix = t < length
            cached = (t < end) & in_prefix
            drafted = (t < end) & (t >= length)
            j = tl.where(drafted, t - length, 0)  # draft key index
            page = tl.load(kv_indices + p0 + t // PS, mask=cached, other=0).to(tl.int64)
            c_row = ((page * PS + t % PS) * HKV + h) * D
            d_row = ((b * N + j).to(tl.int64) * HKV + h) * D
            k = tl.load(k_cache + c_row[:, None] + dd[None, :], mask=cached[:, None], other=0.0) + \
                tl.load(k_draft + d_row[:, None] + dd[None, :], mask=drafted[:, None], other=0.0)
            tree = tl.load(tree_mask + (b * N + tok).to(tl.int64)[:, None] * N + j[None, :],
                           mask=row_ok[:, None] & drafted[None, :], other=0)
            seen = cached[None, :] | (tree != 0)
            s = tl.where(seen, tl.dot(qv, tl.trans(k)) * sm_scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen nothing yet
            alpha = tl.exp(m - m_safe)
            p = tl.exp(s - m_safe[:, None])
            s_sum = s_sum * alpha + tl.sum(p, 1)
            v = tl.load(v_cache + c_row[:, None] + dd[None, :], mask=cached[:, None], other=0.0) + \
                tl.load(v_draft + d_row[:, None] + dd[None, :], mask=drafted[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        o_off = (w * N + tok).to(tl.int64) * HQ + head
        tl.store(part_o + o_off[:, None] * D + dd[None, :], acc / tl.maximum(s_sum, 1e-30)[:, None],
                 mask=row_ok[:, None])
        tl.store(part_lse + o_off, tl.where(s_sum > 0, m + tl.log(tl.maximum(s_sum, 1e-30)), float("-inf")), mask=row_ok)


@triton.jit
def _merge_kernel(part_o, part_lse, first_work, n_chunks, out, N, HQ: tl.constexpr, D: tl.constexpr):
    bt = tl.program_id(0)  # b * N + draft token
    hq = tl.program_id(1)
    b = bt // N
    tok = bt % N
    w0 = tl.load(first_work + b)
    n = tl.load(n_chunks + b)
    dd = tl.arange(0, D)
    m = float("-inf")
    for i in range(0, n):
        m = tl.maximum(m, tl.load(part_lse + ((w0 + i) * N + tok) * HQ + hq))
    total = 0.0
    acc = tl.zeros([D], tl.float32)
    for i in range(0, n):
        off = ((w0 + i) * N + tok) * HQ + hq
        scale = tl.exp(tl.load(part_lse + off) - m)
        total += scale
        acc += scale * tl.load(part_o + off.to(tl.int64) * D + dd)
    tl.store(out + (bt.to(tl.int64) * HQ + hq) * D + dd, (acc / total).to(out.dtype.element_ty))


def chunk_tokens(max_keys: int, kv_heads: int, token_blocks: int, num_sms: int = 132) -> int:
    """Keys per chunk: about 4 programs per SM if the batch were one sequence, 64 to 2048."""
    target = max(1, max_keys * kv_heads * token_blocks // (4 * num_sms))
    return min(2048, max(64, triton.next_power_of_2(target)))


def work_list(kv_indptr, kv_last_page_len, page_size: int, n_draft: int, chunk: int, bound: int):
    """(sequence, chunk) per work item, -1 past the end; each sequence's first item and chunk count."""
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    keys = (pages - 1) * page_size + kv_last_page_len.long() + n_draft
    n_chunks = (keys + chunk - 1) // chunk
    ends = n_chunks.cumsum(0)
    first = ends - n_chunks
    ids = torch.arange(bound, device=kv_indptr.device)
    seq = torch.searchsorted(ends, ids, right=True)
    seq_c = seq.clamp(max=len(n_chunks) - 1)
    work_seq = torch.where(seq < len(n_chunks), seq_c, -1).to(torch.int32)
    return work_seq, (ids - first[seq_c]).to(torch.int32), first.to(torch.int32), n_chunks.to(torch.int32)


def tree_verify(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale,
                chunk: int | None = None, block_n: int = 64, tb: int = 16, num_warps: int = 4):
    batch, n, hq, d = q.shape
    ps, hkv = k_cache.shape[1], k_cache.shape[2]
    tb = min(tb, triton.next_power_of_2(n))
    token_blocks = triton.cdiv(n, tb)
    max_keys = kv_indices.shape[0] * ps + n  # no sequence sees more than all pages plus its tree
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    chunk = chunk or chunk_tokens(max_keys, hkv, token_blocks, sms)
    bound = -(-(kv_indices.shape[0] * ps + batch * n) // chunk) + batch  # sum ceil(x_i / c) <= sum x_i / c + B
    work_seq, work_chunk, first, n_chunks = work_list(kv_indptr, kv_last_page_len, ps, n, chunk, bound)
    part_o = torch.empty(bound, n, hq, d, device=q.device, dtype=torch.float32)
    part_lse = torch.empty(bound, n, hq, device=q.device, dtype=torch.float32)
    _partial_kernel[(bound, hkv, token_blocks)](
        q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask.view(torch.uint8),
        work_seq, work_chunk, part_o, part_lse, sm_scale, ps, n, HQ=hq, HKV=hkv, D=d, CHUNK=chunk,
        BLOCK_N=min(block_n, chunk), TB=tb, num_warps=num_warps)
    out = torch.empty_like(q)
    _merge_kernel[(batch * n, hq)](part_o, part_lse, first, n_chunks, out, n, HQ=hq, D=d)
    return out


def run(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask, sm_scale):
    return tree_verify(q, k_draft, v_draft, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, tree_mask,
                       sm_scale)
