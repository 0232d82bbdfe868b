"""Run a candidate's ``run`` in-process on a problem's edge rounds, judged as the engine judges them.

The rounds, their inputs, layouts, expected outputs and scaled tolerances come from
``solbench.engine.edge`` (the engine's own code); only the worker round trip is left out, so a
library-wide check costs seconds. The engine's path through the worker is covered end to end in
``tests/engine/test_edge.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from solbench.data.domain import apply_layout
from solbench.data.problem import Problem
from solbench.engine.cases import derive_seed, reference_outputs
from solbench.engine.correctness import compare_tensors
from solbench.engine.edge import EdgeRound, prepare_edge
from solbench.engine.problem_code import load_generator, load_reference


def edge_rounds(problem: Problem, seed: int = 7) -> list[EdgeRound]:
    """The edge rounds at the problem's small shape (its smallest workload shrunk by test_axes)."""
    workload = min(problem.workloads, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))
    axes = problem.resolve_axes(workload, overrides=problem.test_axes)
    ref = load_reference(problem)
    return [r for r in prepare_edge(problem, workload, axes, base_seed=seed, device="cpu",
                                    reference=lambda a, inputs: reference_outputs(problem, a, ref, inputs),
                                    gen_fn=load_generator(problem), tolerance=problem.tolerance_for(workload),
                                    derive=derive_seed) if r.shape == "small"]


def run_round(problem: Problem, r: EdgeRound, run: Any) -> str | None:
    """Why ``run`` fails round ``r`` (None: it passes)."""
    args = [apply_layout(v.clone(), lay) if isinstance(v, torch.Tensor) and lay else
            (v.clone() if isinstance(v, torch.Tensor) else v)
            for v, lay in zip(r.sent, r.layouts or [None] * len(r.sent), strict=True)]
    try:
        result = run(*args)
    except Exception as err:  # noqa: BLE001 - a candidate's exception is a failure of the round
        return f"raised {type(err).__name__}: {err}"
    result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
    tol = problem.tolerance
    for (name, want), got in zip(r.expected.items(), result, strict=True):
        if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
            return f"output {name}: {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}"
        cmp = compare_tensors(got, want, r.atol[name], tol.rtol, tol.max_mismatch_ratio)
        if not cmp.passed:
            return f"output {name}: {cmp.reason}"
    return None


def first_failure(problem: Problem, run: Any, seed: int = 7) -> tuple[str, str] | None:
    """(round name, why) of the first edge round ``run`` fails, or None when it passes them all."""
    for r in edge_rounds(problem, seed):
        if r.skipped is None and (why := run_round(problem, r, run)) is not None:
            return r.name, why
    return None
