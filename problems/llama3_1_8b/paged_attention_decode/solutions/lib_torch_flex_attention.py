"""PyTorch's flex_attention (compiled on the first call) over the page pool as one long KV sequence (no copy),
with a block mask built per call from the page table: each sequence visits only the KV blocks that hold its
tokens, and a mask_mod keeps the slots it owns. A library baseline."""

import math

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["device:cuda"]  # compiling flex_attention for a CPU takes minutes: a GPU baseline
MIN_KV_BLOCK = 16  # flex's kernels need KV tiles of 16 slots or more (tl.dot): smaller pages share a block
MAX_KV_BLOCK = 64  # the decode kernel's default KV tile: larger pages span several blocks
_compiled = None


def _kv_block_size(page_size: int) -> int:
    """Blocks that tile each page where pages are multiples of 16 slots (no block mixes two pages; a power of two
    up to 64, as the kernel's tiles are), else 16 slots (several pages a block)."""
    return math.gcd(page_size, MAX_KV_BLOCK) if page_size % MIN_KV_BLOCK == 0 else MIN_KV_BLOCK


def _slot_owner(kv_indptr, kv_indices, kv_last_page_len, pool: int, page_size: int):
    """The sequence each pool slot holds a token of, ``batch`` (no sequence) for other requests' pages and the
    unfilled tail of last pages: [pool * page_size] int32."""
    batch = kv_last_page_len.shape[0]
    pages = (kv_indptr[1:] - kv_indptr[:-1]).long()
    seq_of_page = torch.repeat_interleave(torch.arange(batch, device=pages.device), pages,
                                          output_size=kv_indices.shape[0])  # a fixed size: no host sync
    filled = torch.full_like(seq_of_page, page_size)
    filled[kv_indptr[1:].long() - 1] = kv_last_page_len.long()  # tokens in each page: the last pages' counts
    in_page = torch.arange(page_size, device=pages.device)
    owner = torch.full((pool, page_size), batch, dtype=torch.int32, device=pages.device)
    owner[kv_indices.long()] = torch.where(in_page < filled[:, None], seq_of_page[:, None], batch).int()
    return owner.flatten()


def _paged_block_mask(owner, batch: int, block: int) -> BlockMask:
    """Per sequence, the KV blocks holding any of its slots (in pool order), with the slot mask inside them."""
    slots = owner.shape[0]
    n_blocks = -(-slots // block)
    touched = torch.zeros(batch + 1, n_blocks, dtype=torch.int8, device=owner.device)  # row `batch`: unowned
    touched[owner.long(), torch.arange(slots, device=owner.device) // block] = 1
    touched = touched[:batch]
    order = torch.sort(touched, dim=-1, descending=True, stable=True).indices  # the touched blocks first
    kv_num_blocks = touched.sum(-1, dtype=torch.int32)

    def owned_slot(b, h, q_idx, kv_idx):
        return owner[kv_idx] == b

    return BlockMask.from_kv_blocks(kv_num_blocks[:, None, None], order.int()[:, None, None, :],
                                    BLOCK_SIZE=(128, block), mask_mod=owned_slot, seq_lengths=(1, slots),
                                    compute_q_blocks=False)  # forward only: no transposed (backward) indices


def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    global _compiled
    if _compiled is None:
        # one compile per shape: the workloads and the edge rounds' small shapes can pass dynamo's default of 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        _compiled = torch.compile(flex_attention, dynamic=False)
    pool, page_size, hkv, d = k_cache.shape
    owner = _slot_owner(kv_indptr, kv_indices, kv_last_page_len, pool, page_size)
    mask = _paged_block_mask(owner, q.shape[0], _kv_block_size(page_size))
    k = k_cache.reshape(1, pool * page_size, hkv, d).transpose(1, 2)  # [1, HKV, slots, D]: shared by every sequence
    v = v_cache.reshape(1, pool * page_size, hkv, d).transpose(1, 2)
    out = _compiled(q.unsqueeze(2), k, v, block_mask=mask, scale=float(sm_scale), enable_gqa=True)
    return out.squeeze(2)
