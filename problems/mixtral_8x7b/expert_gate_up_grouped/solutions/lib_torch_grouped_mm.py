"""PyTorch's torch._grouped_mm for the gate and up projections of every expert group, then SiLU and
multiply: a library baseline."""

import torch
import torch.nn.functional as F

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version


def run(x_sorted, group_sizes, w1, w3):
    offsets = group_sizes.cumsum(0).to(torch.int32)  # group ends
    gate = torch._grouped_mm(x_sorted, w1.transpose(1, 2), offs=offsets)
    up = torch._grouped_mm(x_sorted, w3.transpose(1, 2), offs=offsets)
    return F.silu(gate) * up
