"""Honest, with a setup(): a workspace made once per workload (untimed), reused by every call.

run() fails (RUNTIME_ERROR) unless setup ran before it in this worker with the workload's shapes,
and counts the setups it saw, so a test can tell that setup ran once per workload.
"""

import torch

_workspace: dict[str, torch.Tensor] = {}
_setups: list[tuple[int, ...]] = []


def setup(x: torch.Tensor, y: torch.Tensor) -> None:
    _workspace["out"] = torch.empty_like(x)
    _setups.append(tuple(x.shape))


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = _workspace["out"]  # KeyError: setup never ran
    if out.shape != x.shape or _setups.count(tuple(x.shape)) != 1:
        raise RuntimeError(f"setup ran for {_setups}, this call has shape {tuple(x.shape)}")
    return torch.add(y, x, alpha=2, out=out).clone()
