"""Exploit #4 (peers.md): hard-coded answer for a fixed input.

At import, generates the inputs solbench would make for seed 0 (its own input generator is
public) and precomputes their answer; every call returns that answer without looking at the
inputs. Correct only if the harness always used seed 0; solbench draws a secret random base seed
per run and derives a different seed per round and timing set.
"""

from pathlib import Path

import torch

from solbench.data.inputs import make_inputs
from solbench.data.problem import load_problem

EXPECT = "INCORRECT"
PEERS = "4"
DEFENSE = "secret random base seed per run; a different derived seed per round and timing set"
DEVICE = "any"

_PROBLEM = load_problem(Path(__file__).resolve().parent.parent / "fixtures" / "attn_o_proj_residual")
_ANSWERS = {}
for _w in _PROBLEM.workloads:
    _axes = _PROBLEM.resolve_axes(_w)
    _x = make_inputs(_PROBLEM, _axes, seed=0)
    _ANSWERS[_axes["T"]] = torch.addmm(_x["residual"], _x["attn"], _x["weight"].t())


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    answer = _ANSWERS.get(attn.shape[0])
    return answer.clone() if answer is not None else torch.zeros_like(residual)
