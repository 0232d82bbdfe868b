"""The cost hook: a problem's FLOPs and bytes computed from a workload's actual inputs.

For paged or ragged attention, MoE and sampling, the work depends on the data (KV lengths, page
tables, routing), not on the shapes: a formula over axes is wrong there. A problem then names
``cost: reference.py:cost``, a function ``cost(axes, inputs) -> {"flops": int, "bytes": int}``.
It runs in the parent only (trusted problem code, never in the worker), must be cheap and
deterministic, and replaces ``flops`` and ``bytes``.

* ``solbench run``: the cost of each timing set's inputs; the record carries their mean (the median
  time is taken over samples that rotate through the sets) and its spread (:func:`timed_cost`).
* ``solbench sol`` / ``list`` and the Python API's ``workload_point``: the cost of the inputs generated
  with seed 0 on the CPU (:func:`workload_cost`). Inputs the generator does not make are ``meta``
  tensors there (shape and dtype, no values, nothing allocated), so the hook may read the values of
  generated inputs (lengths, indices, routing) and scalars only. Its price is the generator's own
  work on the CPU: milliseconds for index tensors of the shipped problems at any workload size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from solbench.data.hookvalues import hook_cost
from solbench.errors import ProblemError

if TYPE_CHECKING:
    from solbench.data.problem import Problem

COST_SEED = 0
"""The seed of the inputs ``sol`` and ``list`` compute a cost hook's numbers from."""
_CACHE: dict[tuple, Cost] = {}
_CACHE_SIZE = 512


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes: int


def load_cost(problem: Problem) -> Callable[..., Any]:
    """The problem's cost function (imported from its folder, like the reference)."""
    from solbench.data.inputs import _real_file, load_module

    if problem.cost is None:
        raise ProblemError([f"{problem.name}: no cost hook (cost: file.py:function)"])
    mod = load_module(_real_file(problem, "cost", problem.cost), "cost")
    return getattr(mod, problem.cost_function)  # type: ignore[arg-type]


def call_cost(problem: Problem, fn: Callable[..., Any], axes: dict[str, int], inputs: dict[str, Any]) -> Cost:
    """Call the hook and check what it returns: non-negative integers ``flops`` and ``bytes`` below 2^63."""
    try:
        result = fn(dict(axes), dict(inputs))
    except Exception as err:  # noqa: BLE001 - the problem's own code: one line naming it
        first = str(err).splitlines()[0][:300] if str(err) else ""  # a hook's message may be megabytes
        hint = (" (it read the values of an input its generator does not make; only generated inputs and "
                "scalars have values in sol and list)") if "meta" in first.lower() else ""
        raise ProblemError([f"{problem.name}: cost hook {problem.cost} raised {type(err).__name__}: {first}{hint}"]) \
            from None
    try:
        return Cost(*hook_cost(result))
    except ValueError as err:
        raise ProblemError([f"{problem.name}: cost hook {problem.cost}: {err}"]) from None


def workload_cost(problem: Problem, axes: dict[str, int], scalars: dict[str, Any] | None = None) -> Cost:
    """The hook on the seed-0 inputs of these axes (meta tensors for inputs the generator does not make)."""
    from solbench.data.inputs import make_inputs

    scalars = scalars or {}
    key = (str(problem.path), problem.name, tuple(sorted(axes.items())), tuple(sorted(scalars.items())))
    if key not in _CACHE:
        inputs = make_inputs(problem, axes, COST_SEED, device="cpu", scalars=scalars, placeholders=True)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = call_cost(problem, load_cost(problem), axes, inputs)
    return _CACHE[key]


def timed_cost(problem: Problem, axes: dict[str, int], input_sets: list[dict[str, Any]]) -> tuple[Cost, dict]:
    """The mean cost over the timing sets (what the median time was taken over) and a summary for the record."""
    fn = load_cost(problem)
    costs = [call_cost(problem, fn, axes, inputs) for inputs in input_sets]
    if not costs:
        raise ProblemError([f"{problem.name}: no inputs to compute the cost hook on"])
    mean = Cost(round(sum(c.flops for c in costs) / len(costs)), round(sum(c.bytes for c in costs) / len(costs)))
    summary = {
        "source": "hook", "hook": problem.cost, "sets": len(costs),
        "flops_min": min(c.flops for c in costs), "flops_max": max(c.flops for c in costs),
        "bytes_min": min(c.bytes for c in costs), "bytes_max": max(c.bytes for c in costs),
    }
    return mean, summary


def check_cost_hook(problem: Problem, rel_tol: float = 0.01) -> list[str]:
    """``validate --deep`` for a cost hook: one line per finding.

    * every workload: bytes at most ``bytes: auto`` (each input read once, each output written once),
      the upper bound of a kernel that reads only what it needs;
    * at the test axes, on real CPU inputs: the same cost as from placeholders (the hook reads only
      generated values), and FLOPs within ``rel_tol`` of what FlopCounterMode counts when the
      reference runs on those inputs (where it counts anything; up to 2x for a problem tagged ``causal``
      or ``masked``, whose masked-out pairs the reference computes and FlopCounterMode counts).
    """
    from solbench.data.flopcount import count_reference_flops
    from solbench.data.inputs import make_inputs

    label, errs = problem.path or problem.name, []
    for w in problem.workloads:
        axes = problem.resolve_axes(w)
        c, upper = workload_cost(problem, axes, problem.scalars_for(w)), problem.auto_bytes(axes)
        if c.bytes > upper:
            errs.append(f"{label}: cost: workload {w.name}: {c.bytes} bytes, more than bytes: auto ({upper}), "
                        "which reads every input once and writes every output once")
    axes, w = problem.test_axes_resolved(), problem.workloads[0]
    scalars = problem.scalars_for(w)
    real = call_cost(problem, load_cost(problem), axes,
                     make_inputs(problem, axes, COST_SEED, device="cpu", scalars=scalars))
    if real != workload_cost(problem, axes, scalars):
        errs.append(f"{label}: cost: at the test axes the hook gives {real} on real inputs but "
                    f"{workload_cost(problem, axes, scalars)} on placeholders; it must read only generated inputs")
    counted = count_reference_flops(problem, axes, device="cpu")
    if counted and real.flops:
        ratio, hi = counted / real.flops, (2.0 if {"causal", "masked"} & set(problem.tags) else 1.0) + rel_tol
        if not 1 - rel_tol <= ratio <= hi:
            errs.append(f"{label}: cost: {real.flops} FLOPs at the test axes but FlopCounterMode counts {counted} "
                        f"(ratio {ratio:.3f})")
    return errs
