"""``solbench run --small``: a problem shrunk to its ``test_axes``, for quick CPU runs of big problems."""

from __future__ import annotations

from solbench.data.problem import Problem, Workload


def small_problem(problem: Problem) -> Problem:
    """The problem with its const axes set to ``test_axes`` and one workload ``small``: the smallest
    workload's var axes, overridden by ``test_axes`` (``Problem.test_axes_resolved``)."""
    axes = problem.test_axes_resolved()
    consts = {n: a.model_copy(update={"value": axes[n]}) for n, a in problem.axes.items() if a.type == "const"}
    small = Workload(name="small", axes={n: axes[n] for n in problem.var_axes},
                     description=f"test_axes of {problem.name}: {', '.join(f'{k}={v}' for k, v in axes.items())}")
    copy = problem.model_copy(update={"axes": {**problem.axes, **consts}, "workloads": [small]})
    copy._path = problem.path
    return copy
