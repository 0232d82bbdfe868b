"""Issue 13, class 2: real work delayed behind a sleep kernel on another stream, so it ends after the
timed stream's end event; the timed stream gets only a floor-sized spin.

The worker synchronises the whole device after every timed call and the sample's time is every
stream's span up to then: the sleep and the GEMM are both counted (slower than honest, never
faster).
"""

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
HONEST = "gpu_honest_addmm"
PEERS = "13"
DEFENSE = "device-wide synchronize after each sample; all-stream CUPTI span"
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
        spin_s(seed_floor_cover_s(attn))  # starts the GEMM after the timed stream's spin ends
        torch.addmm(residual, attn, weight.t(), out=out)
    spin_s(seed_floor_cover_s(attn))
    return out
