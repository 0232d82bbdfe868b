"""Honest: out = y + 2 * x."""

import torch


def run(x, y):
    return torch.add(y, x, alpha=2)
