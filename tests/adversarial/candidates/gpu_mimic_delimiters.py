"""Issue 13: break the all-stream timer's trace so the time falls back to events. The timer cuts its
CUPTI trace into samples at its own kernels (an int32 zero fill, then a spin of at least 5 us); a
candidate that launches the same pair in the middle of its call makes the trace uncuttable, and
would then be timed by events on the timed stream alone, blind to its side stream.

Caught: a trace that cannot be cut into the timed samples is a REWARD_HACK finding (no fallback).
Since the timer tells its own start spin by its length (at least half the least spin) and cuts at its
own end markers (solbench.timing.cupti, split_calls), whether the pair cuts a sample depends on how
long this candidate's spin runs on the device. Where no sample is cut, the sample stays whole, its span
counts the side stream and the trick buys nothing (H200 2026-12-02, call 5: PASSED at 32.5 us by the
all-stream span, the events' 20.2 us flagged events_cupti_mismatch, side_stream_tail); where one is,
the trace is uncuttable and the record REWARD_HACK (call 6: "trace cut into 31 samples, 30 were timed").
Both are right: PASSED is declared, held against the honest GEMM, and REWARD_HACK accepted (ALSO).
"""

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
ALSO = "REWARD_HACK"  # the pair cut a sample: an uncuttable trace (see the docstring)
HONEST = "gpu_honest_addmm"  # and never faster than the honest GEMM it hides on a side stream
PEERS = "13"
DEFENSE = "all-stream spans cut at the harness's own delimiters (a trace that cannot be cut: trace_unattributed finding, no fallback)"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "prefill_b1_s512"

_side: list = []


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not _side:
        _side.append((torch.cuda.Stream(), torch.empty(1 << 20, dtype=torch.int32, device=attn.device)))
    side, buf = _side[0]
    out = torch.empty_like(residual)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.addmm(residual, attn, weight.t(), out=out)
    buf.zero_()  # the flush's kernel ...
    spin_s(max(10e-6, seed_floor_cover_s(attn)))  # ... then a spin as long as the timer's
    return out
