"""A setup() that raises: the workload is a RUNTIME_ERROR naming the setup phase."""

import torch


def setup(x: torch.Tensor, y: torch.Tensor) -> None:
    raise ValueError("no workspace for this shape")


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y
