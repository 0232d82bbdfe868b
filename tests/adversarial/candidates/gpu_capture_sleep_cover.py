"""Issue 13, class 3 variant: while capturing, record a floor-sized spin and a copy of an output
computed before the capture from the same set (the set's data pointer is the key).

The graph's replays touch none of the inputs. Caught by the refresh check (new data in place,
one more replay, output checked against the reference for the new data).
"""

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
# H200 2026-12-01: the capture fails (a side-stream synchronize, or a graph far faster than eager), the
# timer falls back to events and the call runs eagerly, honestly: PASSED at 18.5-20.6 us (decode_b16) and
# 17.7-19.5 us (decode_b1, where the honest addmm reads 15.5 us in graph mode). The refresh check is the
# defence for a capture trick that survives capture; none of these does.
PEERS = "22, 23"
DEFENSE = "graph refresh check"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "decode_b16"

_seen: dict[int, torch.Tensor] = {}


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not torch.cuda.is_current_stream_capturing():
        out = torch.addmm(residual, attn, weight.t())
        _seen[attn.data_ptr()] = out.clone()
        return out
    out = torch.empty_like(residual)
    spin_s(seed_floor_cover_s(attn))
    cached = _seen.get(attn.data_ptr())
    out.copy_(cached if cached is not None else residual)
    return out
