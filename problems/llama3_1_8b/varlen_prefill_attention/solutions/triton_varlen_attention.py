"""Triton flash attention (forward, causal, GQA) over packed variable-length sequences.

The query blocks of all sequences form one work list, built on the device without a host
synchronisation: its length is bounded by T / BLOCK_M + B, programs past the end exit. A program
takes one block of BLOCK_M query rows of one head, walks the key blocks of its own sequence up to
the diagonal (online softmax in float32, tl.dot for both products), and masks only the diagonal
block. The longest sequences' blocks come first in the list, so the long tail of a skewed batch
starts early.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_kernel(q, k, v, out, cu_seqlens, work_seq, work_block, sm_scale,
                 HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    w = tl.program_id(0)
    hq = tl.program_id(1)
    b = tl.load(work_seq + w)
    if b >= 0:
        hk = hq // (HQ // HKV)
        start = tl.load(cu_seqlens + b)
        length = tl.load(cu_seqlens + b + 1) - start
        m0 = tl.load(work_block + w) * BLOCK_M
        rows = m0 + tl.arange(0, BLOCK_M)
        row_ok = rows < length
        dd = tl.arange(0, D)
        qv = tl.load(q + ((start + rows).to(tl.int64) * HQ + hq)[:, None] * D + dd[None, :], mask=row_ok[:, None],
                     other=0.0)
        m = tl.full([BLOCK_M], float("-inf"), tl.float32)
        s_sum = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        end = tl.minimum(m0 + BLOCK_M, length)  # causal: no key past the block's last row
        for n0 in range(0, end, BLOCK_N):
            cols = n0 + tl.arange(0, BLOCK_N)
            kv_row = ((start + cols).to(tl.int64) * HKV + hk)[:, None] * D + dd[None, :]
            col_ok = cols < end
            kb = tl.load(k + kv_row, mask=col_ok[:, None], other=0.0)
            s = tl.dot(qv, tl.trans(kb)) * sm_scale
            s = tl.where((cols[None, :] <= rows[:, None]) & col_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            alpha = tl.exp(m - m_new)
            p = tl.exp(s - m_new[:, None])
            s_sum = s_sum * alpha + tl.sum(p, 1)
            vb = tl.load(v + kv_row, mask=col_ok[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(vb.dtype), vb)
            m = m_new
        o = acc / tl.where(row_ok, s_sum, 1.0)[:, None]
        tl.store(out + ((start + rows).to(tl.int64) * HQ + hq)[:, None] * D + dd[None, :], o.to(out.dtype.element_ty),
                 mask=row_ok[:, None])


def work_list(cu_seqlens, block_m: int, bound: int):
    """(sequence, query block) per item, longest sequences first, -1 past the end."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    order = torch.argsort(lengths, descending=True, stable=True)
    n_blocks = (lengths[order] + block_m - 1) // block_m
    ends = n_blocks.cumsum(0)
    ids = torch.arange(bound, device=cu_seqlens.device)
    slot = torch.searchsorted(ends, ids, right=True)
    slot_c = slot.clamp(max=len(n_blocks) - 1)
    work_seq = torch.where(slot < len(n_blocks), order[slot_c], -1).to(torch.int32)
    # Within a sequence, the last (longest-running) query blocks first.
    work_block = (ends[slot_c] - 1 - ids).to(torch.int32)
    return work_seq, work_block


def varlen_attention(q, k, v, cu_seqlens, sm_scale, block_m: int = 128, block_n: int = 64, num_warps: int = 8,
                     num_stages: int = 2):
    total, hq, d = q.shape
    batch = cu_seqlens.shape[0] - 1
    bound = -(-total // block_m) + batch
    work_seq, work_block = work_list(cu_seqlens, block_m, bound)
    out = torch.empty_like(q)
    _attn_kernel[(bound, hq)](q, k, v, out, cu_seqlens, work_seq, work_block, sm_scale, HQ=hq, HKV=k.shape[1], D=d,
                              BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps, num_stages=num_stages)
    return out


def run(q, k, v, cu_seqlens, sm_scale):
    return varlen_attention(q, k, v, cu_seqlens, sm_scale)
