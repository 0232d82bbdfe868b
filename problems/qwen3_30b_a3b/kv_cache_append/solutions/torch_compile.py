"""torch.compile of the indexed cache write, compiled on the first call (static shapes)."""

import torch

_compiled = None


def _append(k, v, k_cache, v_cache, slot_mapping):
    k_cache[slot_mapping] = k
    v_cache[slot_mapping] = v
    return k_cache, v_cache


def run(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
        slot_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(_append, dynamic=False)
    return _compiled(k, v, k_cache, v_cache, slot_mapping)
