"""Exploit #23 (peers.md, GPU only): CUDA-graph replay keyed on partial identity.

Captures the first call into a CUDA graph and, for every later call of the same shape, replays it
and returns the graph's static output, whatever the new inputs are: the graph still reads the
first call's (stale) addresses. Every round has fresh inputs at fresh addresses, so the second
round's output is wrong.
"""

import torch

EXPECT = "INCORRECT"
# H200 2026-12-01, second session (inputs in the device pool): the stale graph read an address the
# pool had since unmapped, an illegal access, RUNTIME_ERROR; either rejection is right.
ALSO = "RUNTIME_ERROR"
PEERS = "23"
DEFENSE = "fresh inputs per round; outputs checked every round and for timed calls"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "decode_b16"

_graphs: dict[tuple, tuple] = {}


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    key = tuple(attn.shape)  # partial identity: the shape, not the addresses
    if key not in _graphs:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.addmm(residual, attn, weight.t())  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = torch.addmm(residual, attn, weight.t())
        _graphs[key] = (graph, static_out)
    graph, static_out = _graphs[key]
    graph.replay()
    return static_out
