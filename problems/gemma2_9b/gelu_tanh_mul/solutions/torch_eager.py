"""Straightforward PyTorch: F.gelu(approximate='tanh') on the gate half, times the up half."""

import torch
import torch.nn.functional as F


def run(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up
