"""PyTorch's flex_attention (compiled on the first call) for absorbed MLA decode: the latent page pool as one
long KV sequence of one KV head (no copy), keys its 576-dim rows, values their first 512 dims (flex allows a
value head dim other than the key's), and the 128 heads as 128 query rows of one head, since all share that
KV head; a block mask built per call from the page table lets each sequence visit only the KV blocks that
hold its rows, and a mask_mod keeps the rows it owns. A library baseline."""

import math

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
ROPE_DIMS = 64  # the tail of each q / cache row: scores only, not values
MIN_KV_BLOCK = 16  # flex's kernels need KV tiles of 16 rows or more (tl.dot): smaller pages share a block
MAX_KV_BLOCK = 64  # the decode kernel's default KV tile: larger pages span several blocks
# Heads as query rows: flex's decode kernel (queries under 128) would hold all 128 heads of the KV head in
# one tile, 256 KB of q at 576 dims (padded to 1024), and tiles of fewer heads are not allowed there. The main
# kernel's tiles of 16 heads, 32 KV rows and one stage need ~100 KB of shared memory (its default for dims
# over 256, 64 x 32 x 3 stages, would not fit): a choice from the sizes, not tuned.
KERNEL_OPTIONS = {"BLOCK_M": 16, "num_warps": 4, "num_stages": 1}
BLOCK_N = 32  # KV rows a step (at most the mask's block, which it must divide: both are powers of two)
Q_BLOCK = 128  # flex's default sparse block along the queries (the heads here)
_compiled = None


def _slot_owner(kv_indptr, kv_indices, kv_last_page_len, pool: int, page_size: int):
    """The sequence whose token each pool row holds; ``batch`` for rows of no sequence: [pool * page_size]."""
    batch = kv_last_page_len.shape[0]
    page_counts = (kv_indptr[1:] - kv_indptr[:-1]).long()
    page_seq = torch.repeat_interleave(torch.arange(batch, device=page_counts.device), page_counts,
                                       output_size=kv_indices.shape[0])  # a fixed size: no host sync
    rows_used = torch.full_like(page_seq, page_size)
    rows_used[kv_indptr[1:].long() - 1] = kv_last_page_len.long()  # last pages hold kv_last_page_len rows
    row = torch.arange(page_size, device=page_counts.device)
    owner = torch.full((pool, page_size), batch, dtype=torch.int32, device=page_counts.device)
    owner[kv_indices.long()] = torch.where(row < rows_used[:, None], page_seq[:, None], batch).int()
    return owner.flatten()


def _kv_block_size(page_size: int) -> int:
    """Blocks that tile each page where pages are multiples of 16 rows (no block mixes two pages; a power of two
    up to 64, as the kernel's tiles are), else 16 rows (several pages a block)."""
    return math.gcd(page_size, MAX_KV_BLOCK) if page_size % MIN_KV_BLOCK == 0 else MIN_KV_BLOCK


def _paged_block_mask(owner, batch: int, block: int, queries: int = 1) -> BlockMask:
    """Per sequence, the KV blocks holding any of its rows (in pool order), with the row mask inside them; the
    same for each of its ``queries`` rows (its heads)."""
    rows = owner.shape[0]
    holds = torch.zeros(batch + 1, -(-rows // block), dtype=torch.int8, device=owner.device)  # last: no one's
    holds[owner.long(), torch.arange(rows, device=owner.device) // block] = 1
    holds = holds[:batch]
    first_held = torch.sort(holds, dim=-1, descending=True, stable=True).indices

    def own_row(b, h, q_idx, kv_idx):
        return owner[kv_idx] == b

    q_blocks = -(-queries // Q_BLOCK)
    count = holds.sum(-1, dtype=torch.int32)[:, None, None].expand(-1, 1, q_blocks)
    return BlockMask.from_kv_blocks(count, first_held.int()[:, None, None].expand(-1, 1, q_blocks, -1),
                                    BLOCK_SIZE=(Q_BLOCK, block), mask_mod=own_row, seq_lengths=(queries, rows),
                                    compute_q_blocks=False)  # forward only


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    pool, page_size, dims = kv_cache.shape
    owner = _slot_owner(kv_indptr, kv_indices, kv_last_page_len, pool, page_size)
    block = _kv_block_size(page_size)
    mask = _paged_block_mask(owner, q.shape[0], block, queries=q.shape[1])
    keys = kv_cache.reshape(1, 1, pool * page_size, dims)
    out = _compiled(q.unsqueeze(1), keys, keys[..., :dims - ROPE_DIMS], block_mask=mask, scale=float(softmax_scale),
                    kernel_options={**KERNEL_OPTIONS, "BLOCK_N": min(BLOCK_N, block)})  # [B, 1, H, C]
    return out.squeeze(1)
