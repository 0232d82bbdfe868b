"""FlashInfer's RoPE from a cos/sin cache (flashinfer.rope.apply_rope_with_cos_sin_cache), as a library baseline. Needs flashinfer (skipped when absent).

Layout conversion: FlashInfer takes q and k flattened per token, [T, heads * D] (a view here, strided rows
included: it passes the token stride to its kernel), a float32 cos_sin_cache [positions, D] holding the D/2
cosines then the D/2 sines, and position ids into it. The problem's tables are per token, [T, D], each
frequency repeated in both halves (rotate_half convention, FlashInfer's is_neox=True), so the cache is
cat(cos[:, :D/2], sin[:, :D/2]) in float32 (exact from bfloat16) and token t reads row t. Building the
cache is part of this baseline's time (a server builds it once for all positions). Outputs are new tensors.
"""

import torch
from flashinfer.rope import apply_rope_with_cos_sin_cache

BASELINE = "flashinfer-python"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["flashinfer"]  # read by solbench (never imported) to skip this file when it is not installed


def run(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, d = q.shape[0], q.shape[-1]
    cache = torch.cat((cos[:, :d // 2], sin[:, :d // 2]), dim=-1).float()
    positions = torch.arange(tokens, dtype=torch.int64, device=q.device)
    q_out, k_out = apply_rope_with_cos_sin_cache(positions, q.reshape(tokens, -1), k.reshape(tokens, -1), d, cache,
                                                 is_neox=True)
    return q_out.reshape(q.shape), k_out.reshape(k.shape)
