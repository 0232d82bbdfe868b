"""Issue 13, class 1 variant: the GEMM launched from another Python thread on a high-priority stream
the caller never waits for, plus a floor-sized spin on the timed stream.

CUPTI records the whole context, whatever thread launched the work and whatever the stream's
priority: the GEMM is in the sample's span.
"""

import threading

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
HONEST = "gpu_honest_addmm"
PEERS = "13, 14"
DEFENSE = "all-stream CUPTI time (every thread and stream of the context)"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "prefill_b1_s512"

_stream: list = []


def _launch(attn, weight, residual, out, ready):
    with torch.cuda.stream(_stream[0]):
        _stream[0].wait_event(ready)
        torch.addmm(residual, attn, weight.t(), out=out)


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not _stream:
        lo, hi = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)
        _stream.append(torch.cuda.Stream(priority=min(lo, hi)))
    out = torch.empty_like(residual)
    ready = torch.cuda.Event()
    ready.record()
    t = threading.Thread(target=_launch, args=(attn, weight, residual, out, ready))
    t.start()
    t.join()  # the launch is done (no thread left behind); the GPU work is not waited for
    spin_s(seed_floor_cover_s(attn))
    return out
