"""Issue 13, class 3: a graph-capture trick. Outside capture, honest. While the timer captures a
graph (``torch.cuda.is_current_stream_capturing()``), compute the output eagerly on a side stream
that is not part of the capture, and record into the graph only a cheap copy of that precomputed
result: every replay then "computes" in the time of a copy.

Caught by the refresh check: after the timed replays, new data the candidate has not seen is
written into the sets in place and the graph replayed once more; its output is checked against
the reference for the new data.
"""

import torch

EXPECT = "PASSED"
# H200 2026-12-01: the capture fails (a side-stream synchronize, or a graph far faster than eager), the
# timer falls back to events and the call runs eagerly, honestly: PASSED at 18.5-20.6 us (decode_b16) and
# 17.7-19.5 us (decode_b1, where the honest addmm reads 15.5 us in graph mode). The refresh check is the
# defence for a capture trick that survives capture; none of these does.
PEERS = "22, 23"
DEFENSE = "graph refresh: new data in place after the timed replays, one more replay, output checked"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "decode_b16"

_side: list = []


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_current_stream_capturing():
        return torch.addmm(residual, attn, weight.t())
    if not _side:
        _side.append(torch.cuda.Stream())
    with torch.cuda.stream(_side[0]):  # not joined to the capture: runs now, once
        done = torch.addmm(residual, attn, weight.t())
    _side[0].synchronize()
    out = torch.empty_like(residual)
    out.copy_(done)  # the only work the graph replays
    return out
