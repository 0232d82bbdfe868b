"""Reference: scatter the new keys/values into their cache slots, in place, returning the caches."""

import torch


def run(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
        slot_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # Slots are distinct, so the order of the writes does not matter.
    k_cache[slot_mapping] = k
    v_cache[slot_mapping] = v
    return k_cache, v_cache


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    """Distinct slots drawn uniformly from the whole cache (as a paged allocator hands them out)."""
    perm = torch.randperm(axes["SLOTS"], generator=generator, device=device)
    return {"slot_mapping": perm[: axes["T"]].to(torch.int64)}
