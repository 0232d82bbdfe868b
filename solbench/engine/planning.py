"""Planning a run: problems, workloads and candidates resolved into the engine's plan items."""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from solbench.data import Problem, Workload, resolve_problem, small_problem
from solbench.engine.runner import PlanItem
from solbench.errors import ProblemError, SolbenchError, did_you_mean
from solbench.worker import (
    CandidateFile,
    describe_candidates,
    shipped_candidates,
    skipped_candidates,
    skipped_line,
    source_run_mismatch,
)

CPU_BIG_BYTES = 128 << 20  # a workload moving more takes seconds a call on a CPU, minutes with its rounds


def as_problem(p: str | Path | Problem, problems_dir: Path | None) -> Problem:
    if isinstance(p, Problem):
        return p
    return resolve_problem(p, problems_dir)


def _select_workloads(problem: Problem, names: Sequence[str], smallest: bool) -> list[Workload]:
    chosen = [w for w in problem.workloads if not names or w.name in names]
    if smallest and chosen:
        chosen = [min(chosen, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))]
    return chosen


def _given_for(problem: Problem, given: list[CandidateFile]) -> list[CandidateFile]:
    """The given candidates as they run on ``problem``: a file that shares its name with one of the
    problem's own candidates but is another file is named by its folder (``swiglu/torch_eager``), so
    its records are never taken for the problem's own."""
    own = {f.stem: f.resolve() for f in shipped_candidates(problem.folder)}
    return [replace(c, name=_name_by_folder(c.path)) if c.name in own and own[c.name] != c.path else c
            for c in given]


def _name_by_folder(path: Path) -> str:
    folder = path.parent.parent if path.parent.name == "solutions" else path.parent
    return f"{folder.name}/{path.stem}"


def _refuse_misfits(plan: list[PlanItem]) -> None:
    """With several problems, a given file whose ``def run`` (read, never run) cannot take a problem's
    inputs is refused before anything runs: it was written for another problem."""
    misfits = [(c, item.problem, why) for item in plan for c in item.candidates if c.path.suffix == ".py"
               for why in [source_run_mismatch(c.path, list(item.problem.inputs), item.problem.name)] if why]
    if misfits:
        c, problem, why = misfits[0]
        more = f" (and {len(misfits) - 1} more such pairs)" if len(misfits) > 1 else ""
        raise SolbenchError(f"--solution {c.display_path} does not fit {problem.name}: {why}{more}; run each "
                            "file with the problems it was written for")


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _tell_skipped(problem: Problem, log: Callable[[str], None]) -> None:
    for path, missing in skipped_candidates(problem.folder):
        log(skipped_line(problem.name, path, missing))


def plan_run(
    problems: Sequence[str | Path | Problem],
    solutions: Sequence[str | Path] | None = None,
    *,
    workloads: Sequence[str] = (),
    smallest_workload: bool = False,
    problems_dir: Path | None = None,
    small: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[PlanItem]:
    """Resolve problems, workloads and candidates (the problem's shipped solutions when none given).
    A shipped candidate left out for a missing module (``REQUIRES``) is told to ``log`` in one line
    (default: standard error), never skipped silently."""
    if not problems:
        raise SolbenchError("no problem given: pass a problem.yaml path or a name from `solbench list`")
    given = describe_candidates(solutions) if solutions else None
    plan = []
    for p in problems:
        problem = as_problem(p, problems_dir)
        problem = small_problem(problem) if small else problem  # --small: the test_axes, one workload
        if given is None:
            _tell_skipped(problem, log or stderr_line)
        cands = _given_for(problem, given) if given is not None else describe_candidates(
            shipped_candidates(problem.folder))
        if not cands:
            raise SolbenchError(f"{problem.name} ships no candidates under solutions/: pass --solution FILE")
        plan.append(PlanItem(problem, _select_workloads(problem, workloads, smallest_workload), cands))
    if given is not None and len(plan) > 1:
        _refuse_misfits(plan)
    known = {w.name for item in plan for w in item.problem.workloads}
    unknown = [n for n in workloads if n not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise ProblemError([f"no workload named {', '.join(map(repr, unknown))} in the given problems{hint} "
                            f"(workloads: {', '.join(sorted(known))})"])
    return [item for item in plan if item.workloads]


def cpu_small_default(problems: Sequence[str | Path | Problem], device: str, problems_dir: Path | None,
                      log: Callable[[str], None]) -> bool:
    """Whether a run on ``device`` with no workload named takes each problem's ``small`` workload: on a
    CPU, when a workload moves more than CPU_BIG_BYTES (rmsnorm at T=16384 took minutes a call there);
    said in one line."""
    if device.startswith("cuda"):
        return False
    found = [as_problem(p, problems_dir) for p in problems]
    big = [f"{p.name} {w.name}" for p in found for w in p.workloads if p.auto_bytes(p.resolve_axes(w)) > CPU_BIG_BYTES]
    if not big:
        return False
    log(f"on a CPU, each problem's small workload ({big[0]}{' and more' if len(big) > 1 else ''} would take minutes "
        "here): --all-workloads or --workload NAME to run them")
    return True


def largest_workload(problem: Problem, workloads: Sequence[Workload]) -> list[Workload]:
    """The workload that moves the most bytes (what a profile of a problem looks at first)."""
    return [max(workloads, key=lambda w: problem.auto_bytes(problem.resolve_axes(w)))] if workloads else []


def only_candidates(plan: list[PlanItem], patterns: Sequence[str]) -> list[PlanItem]:
    """The plan with only the candidates whose name matches one of ``patterns``; at least one must."""
    for item in plan:
        item.candidates = [c for c in item.candidates if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    kept = [item for item in plan if item.candidates]
    if not kept:
        raise SolbenchError(f"--only {' '.join(patterns)}: no candidate of the given problems matches; candidate "
                            "names are solution file names without .py")
    return kept
