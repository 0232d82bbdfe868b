"""Exploit #24 family (peers.md): exit early with status 0.

Calls ``os._exit(0)`` inside ``run``, for harnesses that treat a clean exit as success or read a
partial result. The parent sees its worker die without a reply: RUNTIME_ERROR.
"""

import os

import torch

EXPECT = "RUNTIME_ERROR"
PEERS = "24"
DEFENSE = "the parent decides; a worker that dies without replying is RUNTIME_ERROR"
DEVICE = "any"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    os._exit(0)
