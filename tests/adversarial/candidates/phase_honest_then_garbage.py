"""Exploits #19/#22 (peers.md): phase detection by call count.

Honest while the call count is small (the correctness rounds), then returns a cheaper wrong
answer (the projection without the residual add) for every later call: the timing loop's calls.
Caught because the timed outputs are checked too.
"""

import torch

EXPECT = "INCORRECT"
PEERS = "19, 22"
DEFENSE = "outputs of timed calls re-checked"
DEVICE = "any"

_calls = 0


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    global _calls
    _calls += 1
    if _calls <= 3:
        return torch.addmm(residual, attn, weight.t())
    return attn @ weight.t()
