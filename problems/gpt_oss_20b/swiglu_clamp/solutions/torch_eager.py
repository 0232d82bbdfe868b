"""Eager PyTorch, as HF's GptOssExperts._apply_gate (bf16 arithmetic)."""

import torch


def run(gate_up):
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(min=None, max=7.0)
    up = up.clamp(min=-7.0, max=7.0)
    return (up + 1) * (gate * torch.sigmoid(gate * 1.702))
