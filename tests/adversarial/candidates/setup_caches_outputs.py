"""Exploit: setup() as a cache of outputs (peers.md #17 moved out of the timed call).

setup(...) runs once per workload, untimed, in the same worker. This one computes the answer for
the inputs it is handed and run() serves that answer to every call without touching its own
inputs, which would score near the cost of a copy if setup saw the inputs of the rounds or of the
timing sets. It does not: setup gets a setup case from a seed of its own that no round and no
timing set uses, so the first round already gets a stale answer.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "17"
DEFENSE = "setup gets a case of its own (seed derived from the secret one, used for nothing else); rounds on fresh inputs"
DEVICE = "any"

_answers: list[torch.Tensor] = []


def setup(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> None:
    _answers.append(torch.addmm(residual, attn, weight.t()))


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return _answers[-1].clone()
