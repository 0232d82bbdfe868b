"""Reference: row gather by index."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    return {"ids": torch.randint(0, axes["V"], (axes["T"],), generator=generator, device=device)}


def run(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, ids)
