"""Exploit #5 (peers.md): RNG prediction.

solbench's input generation and seed derivation are public. On its first call the candidate
searches for the run's base seed (the ``--seed`` on the parent's command line if there is one,
else common and small seeds) by regenerating round 0's ``attn`` and comparing; with the base
seed it predicts every later round's and timing set's inputs, precomputes their outputs, and
from then on only looks answers up. No base seed found: it answers zeros. solbench's base seed is
secret (``secrets.randbits(63)``) unless the user passes ``--seed``, which makes a run
reproducible and therefore predictable: never pass ``--seed`` when scoring untrusted code.
"""

import os
from pathlib import Path

import torch

from solbench.data.inputs import make_inputs
from solbench.data.problem import load_problem
from solbench.engine.cases import derive_seed

EXPECT = "INCORRECT"
PEERS = "5"
DEFENSE = "secret random base seed per run (never written anywhere the worker can read)"
DEVICE = "any"

_PROBLEM = load_problem(Path(__file__).resolve().parent.parent / "fixtures" / "attn_o_proj_residual")
_WORKLOAD_BY_T = {_PROBLEM.resolve_axes(w)["T"]: w for w in _PROBLEM.workloads}
_answers: dict[bytes, torch.Tensor] = {}
_searched: set[int] = set()


def _parent_seed() -> list[int]:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            argv = fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []
    return [int(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a == "--seed" and argv[i + 1].lstrip("-").isdigit()]


def _inputs(base: int, workload, phase: str, index: int) -> dict:
    seed = derive_seed(base, _PROBLEM.name, workload.name, phase, index)
    return make_inputs(_PROBLEM, _PROBLEM.resolve_axes(workload), seed)


def _learn(attn: torch.Tensor) -> None:
    workload = _WORKLOAD_BY_T.get(attn.shape[0])
    if workload is None or attn.shape[0] in _searched:
        return
    _searched.add(attn.shape[0])
    for base in [*_parent_seed(), 0, 1, 42, 1234, 2024, *range(2, 256)]:
        if torch.equal(_inputs(base, workload, "round", 0)["attn"], attn.cpu()):
            for phase, count in (("round", 16), ("set", 64)):
                for i in range(count):
                    x = _inputs(base, workload, phase, i)
                    _answers[x["attn"].view(torch.int16).numpy().tobytes()] = torch.addmm(x["residual"], x["attn"], x["weight"].t())
            return


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    _learn(attn)
    answer = _answers.get(attn.cpu().view(torch.int16).numpy().tobytes())
    return answer.to(attn.device) if answer is not None else torch.zeros_like(residual)
