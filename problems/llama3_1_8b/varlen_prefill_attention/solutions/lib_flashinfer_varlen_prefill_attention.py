"""FlashInfer's BatchPrefillWithRaggedKVCacheWrapper (causal), as a library baseline. Needs flashinfer (skipped when absent).

The problem's packed q [T, HQ, D] and k, v [T, HKV, D] are FlashInfer's ragged NHD layout, and cu_seqlens is
both qo_indptr and kv_indptr (each prompt attends to itself). FlashInfer's causal mask is aligned to the
bottom right (query i of a sequence sees key j <= i + kv_len - qo_len); with qo_len == kv_len that is the
problem's j <= i. Query head h reads KV head h // (HQ / HKV), as in the reference. plan() runs inside every
call (it reads cu_seqlens on the host), a cost a server shares across its layers.
"""

import torch
from flashinfer.prefill import BatchPrefillWithRaggedKVCacheWrapper

BASELINE = "flashinfer-python"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["flashinfer"]  # read by solbench (never imported) to skip this file when it is not installed

WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's recommended float workspace
# one wrapper per device, kept across calls and re-planned in each, as a server keeps it
_wrappers: dict[torch.device, BatchPrefillWithRaggedKVCacheWrapper] = {}


def run(q, k, v, cu_seqlens, sm_scale):
    hq, d = q.shape[1], q.shape[2]
    if q.device not in _wrappers:  # the workspace is scratch (split-KV partials): no result outlives a call
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
        _wrappers[q.device] = BatchPrefillWithRaggedKVCacheWrapper(workspace, kv_layout="NHD")
    wrapper = _wrappers[q.device]
    wrapper.plan(cu_seqlens, cu_seqlens, hq, k.shape[1], d, causal=True,
                 q_data_type=q.dtype, kv_data_type=k.dtype, sm_scale=float(sm_scale))
    return wrapper.run(q, k, v)
