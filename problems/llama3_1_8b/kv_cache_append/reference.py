"""Reference: scatter the new K/V rows into copies of the caches."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    # Distinct slots (so a kernel that ignores the batch index cannot land on the right rows); a
    # prefill's pages (B tokens, L < B slots each) get a random slot per page instead.
    if axes["L"] >= axes["B"]:
        positions = torch.randperm(axes["L"], generator=generator, device=device)[: axes["B"]]
    else:
        positions = torch.randint(0, axes["L"], (axes["B"],), generator=generator, device=device)
    return {"positions": positions}


def run(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    k_out, v_out = k_cache.clone(), v_cache.clone()
    for b, pos in enumerate(positions.tolist()):
        k_out[b, pos] = k_new[b]
        v_out[b, pos] = v_new[b]
    return k_out, v_out
