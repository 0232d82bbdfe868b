"""Reference: tanh-approximated GELU of the gate times up, in float64 (cheap, elementwise), rounded once."""

import math

import torch


def run(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.double().chunk(2, dim=-1)
    inner = math.sqrt(2.0 / math.pi) * (gate + 0.044715 * gate.pow(3))
    return (0.5 * gate * (1.0 + torch.tanh(inner)) * up).to(gate_up.dtype)
