"""Triton grouped GEMM for MoE (vLLM fused_moe's structure): one launch for all experts.

The (token, expert) pairs are sorted by expert on the device; each expert's rows are cut into blocks
of BLOCK_M, and the blocks of all experts form one list whose length is bounded by the shapes
(T*K / BLOCK_M + E), so nothing waits on the host. A program takes one block and one BLOCK_N slice of
the expert's [gate; up] rows, gathers its tokens' rows of x, and writes each result row back to the
pair's place. Experts no token routes to get no block: their weights are never read.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_kernel(x, w, out, order, block_expert, block_row, expert_end, N, K_HID,
                    TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    blk = tl.program_id(0)
    nb = tl.program_id(1)
    e = tl.load(block_expert + blk)
    if e >= 0:
        r0 = tl.load(block_row + blk)
        r_end = tl.load(expert_end + e)
        rows = r0 + tl.arange(0, BLOCK_M)
        row_ok = rows < r_end
        pair = tl.load(order + rows, mask=row_ok, other=0).to(tl.int64)  # t * TOPK + j
        cols = nb * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        kk = tl.arange(0, BLOCK_K)
        a_ptr = x + (pair // TOPK)[:, None] * K_HID + kk[None, :]
        b_ptr = w + (e.to(tl.int64) * N + cols)[:, None] * K_HID + kk[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k0 in range(0, K_HID, BLOCK_K):
            k_ok = (k0 + kk) < K_HID
            a = tl.load(a_ptr + k0, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(b_ptr + k0, mask=col_ok[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
        tl.store(out + pair[:, None] * N + cols[None, :], acc.to(out.dtype.element_ty),
                 mask=row_ok[:, None] & col_ok[None, :])


def block_list(topk_ids, experts: int, block_m: int):
    """Pairs sorted by expert; per block its expert (-1 past the end) and first sorted row; each expert's end row."""
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True).to(torch.int32)
    counts = torch.bincount(flat, minlength=experts)
    expert_end = counts.cumsum(0)
    n_blocks = (counts + block_m - 1) // block_m
    block_end = n_blocks.cumsum(0)
    bound = -(-flat.numel() // block_m) + experts
    ids = torch.arange(bound, device=topk_ids.device)
    e = torch.searchsorted(block_end, ids, right=True)
    e_c = e.clamp(max=experts - 1)
    row = expert_end[e_c] - counts[e_c] + (ids - (block_end[e_c] - n_blocks[e_c])) * block_m
    block_expert = torch.where(e < experts, e_c, -1).to(torch.int32)
    return order, block_expert, row.to(torch.int32), expert_end.to(torch.int32), bound


def grouped_gemm(x, w13, topk_ids, block_m: int | None = None, block_n: int = 64, block_k: int = 64,
                 num_warps: int = 4, num_stages: int = 3):
    t, topk = topk_ids.shape
    experts, n, hidden = w13.shape
    # Small blocks when few tokens share an expert (decode), larger when they are many (prefill).
    block_m = block_m or (16 if t * topk <= 4 * experts else 64)
    order, block_expert, block_row, expert_end, bound = block_list(topk_ids, experts, block_m)
    out = torch.empty(t * topk, n, dtype=x.dtype, device=x.device)
    grid = (bound, triton.cdiv(n, block_n))
    _grouped_kernel[grid](x, w13, out, order, block_expert, block_row, expert_end, n, hidden, TOPK=topk,
                          BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps, num_stages=num_stages)
    return out.view(t, topk, n)


def run(x, w13, topk_ids):
    return grouped_gemm(x, w13, topk_ids)
