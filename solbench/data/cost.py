"""The cost hook's contract: a problem's FLOPs and bytes computed from a workload's actual inputs.

For paged or ragged attention, MoE and sampling, the work depends on the data (KV lengths, page
tables, routing), not on the shapes: a formula over axes is wrong there. A problem then names
``cost: reference.py:cost``, a function ``cost(axes, inputs) -> {"flops": int, "bytes": int}``.
It is the problem's own code: it runs in the problem's sandboxed host
(:mod:`solbench.engine.problem_host`), never in the parent nor in a worker; it must be cheap and
deterministic, and replaces ``flops`` and ``bytes``. This module holds what needs no execution: the
check of what a hook returned and the summary of several costs.

* ``solbench run``: the cost of each timing set's inputs; the record carries their mean (the median
  time is taken over samples that rotate through the sets) and its spread (:func:`cost_summary`).
* ``solbench sol`` / ``list`` and the Python API's ``workload_point``: the cost of the inputs generated
  with seed :data:`COST_SEED` on the CPU. Inputs the generator does not make are ``meta``
  tensors there (shape and dtype, no values, nothing allocated), so the hook may read the values of
  generated inputs (lengths, indices, routing) and scalars only. Its price is the generator's own
  work on the CPU: milliseconds for index tensors of the shipped problems at any workload size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solbench.data.hookvalues import hook_cost
from solbench.data.problem import Problem
from solbench.errors import ProblemError

COST_SEED = 0
"""The seed of the inputs ``sol`` and ``list`` compute a cost hook's numbers from."""


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes: int


def cost_from_result(problem: Problem, result: Any) -> Cost:
    """What a hook returned, checked (:func:`solbench.data.hookvalues.hook_cost`): ``{"flops": n,
    "bytes": n}``, real integers in [0, 2^63), not both 0."""
    try:
        return Cost(*hook_cost(result))
    except ValueError as err:
        raise ProblemError([f"{problem.name}: cost hook {problem.cost}: {err}"]) from None


def cost_summary(problem: Problem, costs: list[Cost]) -> tuple[Cost, dict[str, Any]]:
    """The mean cost over the timing sets (what the median time was taken over) and a summary for the record."""
    if not costs:
        raise ProblemError([f"{problem.name}: no inputs to compute the cost hook on"])
    mean = Cost(round(sum(c.flops for c in costs) / len(costs)), round(sum(c.bytes for c in costs) / len(costs)))
    summary = {
        "source": "hook", "hook": problem.cost, "sets": len(costs),
        "flops_min": min(c.flops for c in costs), "flops_max": max(c.flops for c in costs),
        "bytes_min": min(c.bytes for c in costs), "bytes_max": max(c.bytes for c in costs),
    }
    return mean, summary
