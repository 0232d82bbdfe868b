"""Hostile setup(): computes the answer for the inputs it is given and serves it to every call.

It would pass if setup saw the inputs of the correctness rounds or the timing sets; it sees a
setup case of its own (a seed used for nothing else), so the rounds find the stale answer.
"""

import torch

_answer: list[torch.Tensor] = []


def setup(x: torch.Tensor, y: torch.Tensor) -> None:
    _answer.append(x * 2 + y)


def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _answer[-1].clone()
