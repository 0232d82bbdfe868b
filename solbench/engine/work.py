"""A workload's FLOPs and bytes, and its roofline: from the formulas here, from the problem's own code
(a cost hook, ``flops: auto``) in its sandboxed host (:mod:`solbench.engine.problem_host`).

Problems with formulas only never start a host: ``solbench list`` over the library starts one for
the few problems with a cost hook and reuses it for all of them; the numbers are cached per host.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from solbench.data import HardwareSpec, Problem, RooflinePoint, Workload, cost_summary, point
from solbench.data import workload_point as _formula_point
from solbench.engine.problem_host import ProblemHost, default_host


def workload_work(problem: Problem, axes: dict[str, int], workload: Workload | str | None = None,
                  host: ProblemHost | None = None) -> tuple[int, int]:
    """(FLOPs, bytes) of a workload: a cost hook on its seed-0 inputs, ``flops: auto`` counted under
    FlopCounterMode on meta tensors (both in ``host``, default: the process's shared one), or the formulas."""
    if not problem.work_runs_code:
        return problem.formula_work(axes)
    host = host if host is not None else default_host()
    if problem.cost is not None:
        c = host.workload_cost(problem, axes, problem.scalars_for(workload))
        return c.flops, c.bytes
    return host.count_flops(problem, axes), problem.bytes_for(axes)


def workload_point(problem: Problem, workload: Workload | str, spec: HardwareSpec, axes: dict[str, int] | None = None,
                   host: ProblemHost | None = None) -> RooflinePoint:
    """Roofline numbers for one workload of a problem on a spec, whatever computes its work."""
    w = problem.workload(workload) if isinstance(workload, str) else workload
    axes = axes if axes is not None else problem.resolve_axes(w)
    work = workload_work(problem, axes, w, host) if problem.work_runs_code else None
    return _formula_point(problem, w, spec, axes, work)


def problem_points(problem: Problem, spec: HardwareSpec, host: ProblemHost | None = None) -> list[RooflinePoint]:
    return [workload_point(problem, w, spec, host=host) for w in problem.workloads]


def timed_point(problem: Problem, workload: Workload, spec: HardwareSpec, axes: dict[str, int],
                input_sets: list[dict[str, Any]], host: ProblemHost | None = None) -> RooflinePoint:
    """The roofline of the inputs a run timed: a cost hook's mean over the timing sets (with its spread in
    ``cost``), or :func:`workload_point` when the problem has no hook."""
    if problem.cost is None:
        return workload_point(problem, workload, spec, axes, host)
    host = host if host is not None else default_host()
    mean, summary = cost_summary(problem, host.costs(problem, axes, input_sets))
    return replace(point(mean.flops, mean.bytes, problem.compute_dtype, spec, workload.name), cost=summary)


def deep_check(problem: Problem, host: ProblemHost | None = None) -> list[str]:
    """``validate --deep`` for one problem: its reference under FlopCounterMode against its formula, or
    its cost hook's checks (:func:`solbench.engine.problem_code.deep_check`), run in ``host``."""
    return (host if host is not None else default_host()).deep_check(problem)
