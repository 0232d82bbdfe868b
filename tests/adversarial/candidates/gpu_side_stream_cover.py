"""Issue 13, class 1: real work on the candidate's own stream, never joined to the timed stream,
plus a spin on the timed stream sized just over the physics floor so the events time looks real.

Before the all-stream timer this read SOL 0.94-0.95 against an honest 0.66-0.82. Now a sample's
time is every stream's work between its delimiters (CUPTI), so the GEMM is counted whole.
"""

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
HONEST = "gpu_honest_addmm"
PEERS = "13"
DEFENSE = "all-stream CUPTI time (the side stream's GEMM is counted); events vs CUPTI flagged"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "prefill_b1_s512"

_side: list = []


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not _side:
        _side.append(torch.cuda.Stream())
    out = torch.empty_like(residual)
    _side[0].wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side[0]):
        torch.addmm(residual, attn, weight.t(), out=out)
    spin_s(seed_floor_cover_s(attn))
    return out
