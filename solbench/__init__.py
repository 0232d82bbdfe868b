"""solbench: score GPU kernels against the hardware's speed of light.

Public API (the CLI is a thin layer over these)::

    import solbench
    p = solbench.load_problem("problems/llama3_1_8b/attn_o_proj_residual")
    spec = solbench.load_spec("h200_sxm")
    for pt in solbench.problem_points(p, spec):
        print(pt.workload, pt.bound, pt.t_ideal_s)
"""

from __future__ import annotations

from solbench._version import __version__
from solbench.errors import ProblemError, SolbenchError
from solbench.worker import load_sibling

# A small surface: what the README, the docs and candidate files use. Everything else is reached through
# its layer (solbench.data, solbench.engine, solbench.present, ...) or solbench.api.
# Problems, specs and records, lazy too: a worker or a problem host (which imports this package first)
# does not pay for the record's models (pydantic) at every start.
_DATA_NAMES = ("HardwareSpec", "Problem", "ResultRecord", "Status", "detect_spec", "load_problem", "load_spec")
# The evaluation engine (check, time, score, record), imported lazily: it pulls in the runner.
_ENGINE_NAMES = ("RunOptions", "RunResult", "demo", "run_problems")
# Workloads' roofline points, lazy too: a problem's own code (cost hook, flops: auto) runs in its sandboxed host.
_WORK_NAMES = ("problem_points", "workload_point")


# Presentation (results -> leaderboard, charts, report), also lazy: it pulls in pandas and matplotlib.
_PRESENT_NAMES = {"load_results": "frame", "Selection": "frame", "Leaderboard": "ranking", "leaderboard": "ranking",
                  "plot_roofline": "plots", "plot_sol": "plots", "write_report": "report"}


def __getattr__(name: str) -> object:  # PEP 562: engine names load on first use
    if name in _DATA_NAMES:
        from solbench import data

        return getattr(data, name)
    if name in _ENGINE_NAMES:
        from solbench import api

        return getattr(api, name)
    if name in _WORK_NAMES:
        from solbench.engine import work

        return getattr(work, name)
    if name in _PRESENT_NAMES:
        import importlib

        return getattr(importlib.import_module(f"solbench.present.{_PRESENT_NAMES[name]}"), name)
    raise AttributeError(f"module 'solbench' has no attribute {name!r}")


__all__ = [
    "__version__",
    *_DATA_NAMES,
    *_ENGINE_NAMES,
    *_PRESENT_NAMES,
    *_WORK_NAMES,
    "ProblemError",
    "SolbenchError",
    "load_sibling",
]
