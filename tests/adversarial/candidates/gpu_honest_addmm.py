"""Honest control for the GPU timing exploits: the seed problem's GEMM + residual, one addmm on the
caller's stream. The exploits below compute the same thing; their time must not fall below 95% of
this one's."""

import torch

EXPECT = "PASSED"
PEERS = "-"
DEFENSE = "must not be flagged (the all-stream timer's honest baseline)"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "prefill_b1_s512"


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return torch.addmm(residual, attn, weight.t())
