"""FlashInfer's BatchMLAPagedAttentionWrapper (absorbed MLA decode), as a library baseline. Needs flashinfer (skipped when absent).

Layout conversion (views, no copies): FlashInfer takes the query and the cache split in two, q_nope [B, H, C]
and q_pe [B, H, R], ckv_cache [pages, PS, C] and kpe_cache [pages, PS, R]; the problem's rows are [latent |
rope] in one tensor, so each part is a slice of the last axis (row stride C + R; FlashInfer reads the
strides of the first axes). Its score is q_nope . ckv + q_pe . kpe times sm_scale, the problem's q . row
times softmax_scale, and its output is P @ ckv [B, H, C]. FlashInfer's plan takes per-sequence lengths
instead of last-page lengths: (pages - 1) * PS + kv_last_page_len. qo_indptr is 0..B (one query each), not
causal. plan() runs inside every call (it reads the page table on the host), a cost a server shares across layers.
"""

import torch
from flashinfer.mla import BatchMLAPagedAttentionWrapper

BASELINE = "flashinfer-python"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["flashinfer"]  # read by solbench (never imported) to skip this file when it is not installed

ROPE_DIMS = 64  # qk_rope_head_dim: the tail of each q / cache row
WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's recommended float workspace (split-KV partials)
# one wrapper per device, kept across calls and re-planned in each, as a server keeps it
_wrappers: dict[torch.device, BatchMLAPagedAttentionWrapper] = {}


def run(q, kv_cache, kv_indptr, kv_indices, kv_last_page_len, softmax_scale):
    batch, heads, latent = q.shape[0], q.shape[1], q.shape[2] - ROPE_DIMS
    page_size = kv_cache.shape[1]
    kv_lens = ((kv_indptr[1:] - kv_indptr[:-1] - 1) * page_size + kv_last_page_len).to(torch.int32)
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=q.device)
    if q.device not in _wrappers:  # the workspace is scratch (split-KV partials): no result outlives a call
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
        _wrappers[q.device] = BatchMLAPagedAttentionWrapper(workspace)
    wrapper = _wrappers[q.device]
    # by keyword: the flat form's names since 0.2.1; later releases warn on positional MLA arguments
    wrapper.plan(qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices, kv_len_arr=kv_lens,
                 num_heads=heads, head_dim_ckv=latent, head_dim_kpe=ROPE_DIMS, page_size=page_size, causal=False,
                 sm_scale=float(softmax_scale), q_data_type=q.dtype, kv_data_type=kv_cache.dtype)
    return wrapper.run(q_nope=q[..., :latent], q_pe=q[..., latent:],
                       ckv_cache=kv_cache[..., :latent], kpe_cache=kv_cache[..., latent:])
