"""Exploit (peers.md #17/#19 family): look slow once, then return the cached answer.

The first call sleeps (as if compiling) and computes honestly; every later call returns that
first answer at once. Aimed at harnesses that size or skip their timing from the first call, or
check only the first output. Every round has fresh inputs, so the second round fails.
"""

import time

import torch

EXPECT = "INCORRECT"
PEERS = "17, 19"
DEFENSE = "fresh inputs every round; timed outputs re-checked"
DEVICE = "any"

_first: torch.Tensor | None = None


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    global _first
    if _first is None or _first.shape != residual.shape:
        time.sleep(0.2)
        _first = torch.addmm(residual, attn, weight.t())
    return _first
