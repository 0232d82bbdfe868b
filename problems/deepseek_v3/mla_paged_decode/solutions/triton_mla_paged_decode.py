"""Triton split-KV MLA decode over a paged latent cache (the work list of llama3_1_8b's paged decode).

Each program takes one chunk of one sequence for BLOCK_H of the 128 heads: per block of BLOCK_N
rows it loads the rows' 512 latent and 64 rope dims once, scores them against its heads with two
tl.dot calls, and accumulates p @ latent. The heads' partial outputs and log-sum-exps are merged per
sequence by a second kernel.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_kernel(q, kv_cache, kv_indptr, kv_indices, kv_last, work_seq, work_chunk, part_o, part_lse,
                    sm_scale, PS, H: tl.constexpr, C: tl.constexpr, R: tl.constexpr, CHUNK: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr):
    w = tl.program_id(0)
    hb = tl.program_id(1)
    b = tl.load(work_seq + w)
    if b >= 0:
        c = tl.load(work_chunk + w)
        p0 = tl.load(kv_indptr + b)
        length = (tl.load(kv_indptr + b + 1) - p0 - 1) * PS + tl.load(kv_last + b)
        start = c * CHUNK
        end = tl.minimum(start + CHUNK, length)
        heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
        cc = tl.arange(0, C)
        rr = tl.arange(0, R)
        q_row = (b * H + heads) * (C + R)
        q_lat = tl.load(q + q_row[:, None] + cc[None, :])
        q_rope = tl.load(q + q_row[:, None] + C + rr[None, :])
        m = tl.full([BLOCK_H], float("-inf"), tl.float32)
        s_sum = tl.zeros([BLOCK_H], tl.float32)
        acc = tl.zeros([BLOCK_H, C], tl.float32)
        for t0 in range(start, end, BLOCK_N):
            t = t0 + tl.arange(0, BLOCK_N)
            t_ok = t < end
            page = tl.load(kv_indices + p0 + t // PS, mask=t_ok, other=0).to(tl.int64)
            row = (page * PS + t % PS) * (C + R)
            lat = tl.load(kv_cache + row[:, None] + cc[None, :], mask=t_ok[:, None], other=0.0)
            rope = tl.load(kv_cache + row[:, None] + C + rr[None, :], mask=t_ok[:, None], other=0.0)
            s = (tl.dot(q_lat, tl.trans(lat)) + tl.dot(q_rope, tl.trans(rope))) * sm_scale
            s = tl.where(t_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            s_sum = s_sum * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(lat.dtype), lat)
            m = m_new
        tl.store(part_o + (w * H + heads)[:, None] * C + cc[None, :], acc / s_sum[:, None])
        tl.store(part_lse + w * H + heads, m + tl.log(s_sum))


@triton.jit
def _merge_kernel(part_o, part_lse, first_work, n_chunks, out, H: tl.constexpr, C: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    w0 = tl.load(first_work + b)
    n = tl.load(n_chunks + b)
    cc = tl.arange(0, C)
    m = float("-inf")
    for i in range(0, n):
        m = tl.maximum(m, tl.load(part_lse + (w0 + i) * H + h))
    total = 0.0
    acc = tl.zeros([C], tl.float32)
    for i in range(0, n):
        scale = tl.exp(tl.load(part_lse + (w0 + i) * H + h) - m)
        total += scale
        acc += scale * tl.load(part_o + ((w0 + i) * H + h) * C + cc)
    tl.store(out + (b * H + h) * C + cc, (acc / total).to(out.dtype.element_ty))


def work_list(kv_indptr, kv_last_page_len, page_size: int, chunk: int, bound: int):
    """(sequence, chunk) per work item, -1 past the end; each sequence's first item and chunk count."""
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    n_chunks = ((pages - 1) * page_size + kv_last_page_len.long() + chunk - 1) // chunk
    ends = n_chunks.cumsum(0)
    first = ends - n_chunks
    ids = torch.arange(bound, device=kv_indptr.device)
    seq = torch.searchsorted(ends, ids, right=True)
    seq_c = seq.clamp(max=len(n_chunks) - 1)
    work_seq = torch.where(seq < len(n_chunks), seq_c, -1).to(torch.int32)
    return work_seq, (ids - first[seq_c]).to(torch.int32), first.to(torch.int32), n_chunks.to(torch.int32)


def mla_paged_decode(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale, rope_dims: int = 64,
                     chunk: int | None = None, block_n: int = 32, block_h: int = 16, num_warps: int = 4):
    batch, heads, cr = q.shape
    latent, ps = cr - rope_dims, kv_cache.shape[1]
    max_tokens = kv_indices.shape[0] * ps
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    # About 2 waves of programs if the batch were one sequence, 128 to 2048 rows per chunk.
    chunk = chunk or min(2048, max(128, triton.next_power_of_2(max_tokens * (heads // block_h) // (2 * sms))))
    bound = -(-max_tokens // chunk) + batch
    work_seq, work_chunk, first, n_chunks = work_list(kv_indptr, kv_last_page_len, ps, chunk, bound)
    part_o = torch.empty(bound, heads, latent, device=q.device, dtype=torch.float32)
    part_lse = torch.empty(bound, heads, device=q.device, dtype=torch.float32)
    _partial_kernel[(bound, heads // block_h)](q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, work_seq,
                                               work_chunk, part_o, part_lse, softmax_scale, ps, H=heads, C=latent,
                                               R=rope_dims, CHUNK=chunk, BLOCK_N=min(block_n, chunk), BLOCK_H=block_h,
                                               num_warps=num_warps)
    out = torch.empty(batch, heads, latent, device=q.device, dtype=q.dtype)
    _merge_kernel[(batch, heads)](part_o, part_lse, first, n_chunks, out, H=heads, C=latent)
    return out


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    return mla_paged_decode(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale)
