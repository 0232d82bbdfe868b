"""The engine (trusted parent): runs candidates on workloads through workers, checks their outputs
against the reference, scores and records them. The run loop (``runner``) and its options
(``options``), cases, evaluation, correctness, scoring, environment, telemetry and calibration."""

from __future__ import annotations

from solbench._lazy import lazy_getattr

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "CPU_BIG_BYTES": "planning",
    "cpu_small_default": "planning",
    "largest_workload": "planning",
    "only_candidates": "planning",
    "plan_run": "planning",
    "stderr_line": "planning",
    "CPU_DEMO_CANDIDATE": "demo",
    "DEMO_PROBLEMS": "demo",
    "demo_cpu_spec": "demo",
    "demo_problems": "demo",
    "interleave": "interleave",
    "calibrate": "calibrate",
    "RunIdentity": "identity",
    "import_module": "kernelbench",
    "GUARDS_OFF_FLAG": "options",
    "RunOptions": "options",
    "dispatched": "options",
    "resolve_options": "options",
    "new_host": "problem_host",
    "ProfileSettings": "profiling",
    "ProfilingRunner": "profiling",
    "find_ncu": "profiling",
    "ncu_version": "profiling",
    "NullProgress": "runner",
    "PlanItem": "runner",
    "Progress": "runner",
    "Runner": "runner",
    "Evaluation": "scoring",
    "build_record": "scoring",
    "deep_check": "work",
    "problem_points": "work",
    "work": "work",
    "workload_point": "work",
    "workload_work": "work",
}
__all__ = sorted(_HOME)


__getattr__ = lazy_getattr(__name__, _HOME)
