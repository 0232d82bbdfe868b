"""Honest, with a setup(): a workspace made once per workload (untimed), reused by every call.

run() fails (RUNTIME_ERROR) unless the last setup in this worker had this call's shapes, and when
setup ran twice in a row for one shape: setup runs once per workload (and again where edge rounds
change the shape), never before every call.
"""

import torch

_workspace: dict[str, torch.Tensor] = {}
_setups: list[tuple[int, ...]] = []


def setup(x: torch.Tensor, y: torch.Tensor) -> None:
    _workspace["out"] = torch.empty_like(x)
    _setups.append(tuple(x.shape))


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = _workspace["out"]  # KeyError: setup never ran
    repeated = any(a == b for a, b in zip(_setups, _setups[1:], strict=False))
    if out.shape != x.shape or _setups[-1] != tuple(x.shape) or repeated:
        raise RuntimeError(f"setup ran for {_setups}, this call has shape {tuple(x.shape)}")
    return torch.add(y, x, alpha=2, out=out).clone()
