"""Where problems and spec files are found: each search path resolved here, once, for every caller.

Problems: an explicit folder (``--problems``), else ``$SOLBENCH_PROBLEMS``, else the shipped
library. Specs: an explicit folder, then each folder of ``$SOLBENCH_SPECS``, then the shipped
specs. In a checkout the shipped folders are the repository's ``problems/`` and
``hardware_specs/`` (through links under ``solbench/_shipped``); in a wheel they are copies there.
"""

from __future__ import annotations

import os
from pathlib import Path

from solbench.data.problem import Problem, find_problems, load_problem
from solbench.errors import ProblemError, did_you_mean

_SHIPPED = Path(__file__).resolve().parent.parent / "_shipped"
SHIPPED_PROBLEMS = (_SHIPPED / "problems").resolve()
SHIPPED_SPECS = (_SHIPPED / "hardware_specs").resolve()
PROBLEMS_ENV = "SOLBENCH_PROBLEMS"
SPECS_ENV = "SOLBENCH_SPECS"


def problems_root(explicit: str | Path | None = None) -> Path:
    """The folder problems are looked up in by name (see the module docstring for the order)."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(PROBLEMS_ENV)
    return Path(env) if env else SHIPPED_PROBLEMS


def spec_dirs(explicit: str | Path | None = None) -> list[Path]:
    """The folders spec files are looked up in, first match wins."""
    dirs = [Path(explicit)] if explicit is not None else []
    dirs += [Path(p) for p in os.environ.get(SPECS_ENV, "").split(os.pathsep) if p]
    return [*dirs, SHIPPED_SPECS]


def _folder_name(f: Path) -> str:
    return f"{f.parent.parent.name}.{f.parent.name}"


def resolve_problem(arg: str | Path, problems_dir: str | Path | None = None) -> Problem:
    """A problem by path (file or folder) or by name (``llama3_1_8b.rmsnorm``)."""
    p = Path(arg)
    if p.exists():
        return load_problem(p)
    root = problems_root(problems_dir)
    files = find_problems(root) if root.is_dir() else []
    for f in files:  # cheap name test before a full load: the folder layout is <family>/<op>
        if _folder_name(f) == str(arg):
            return load_problem(f)
    for f in files:
        try:
            prob = load_problem(f)
        except ProblemError:
            continue
        if prob.name == str(arg):
            return prob
    hint = did_you_mean(arg, [_folder_name(f) for f in files])
    raise ProblemError([f"problem {str(arg)!r} not found{hint}: give a path to a problem.yaml or a name from "
                        "`solbench list`"])


def library_problems(names: tuple[str, ...], problems_dir: str | Path | None = None) -> dict[str, Problem]:
    """The named problems that the library holds and that load (by folder name ``<family>.<op>``)."""
    root = problems_root(problems_dir)
    wanted = set(names)
    out: dict[str, Problem] = {}
    for f in find_problems(root) if root.is_dir() else []:
        if _folder_name(f) not in wanted:
            continue
        try:
            prob = load_problem(f)
        except ProblemError:
            continue
        out[prob.name] = prob
    return out


def library_tags(names: tuple[str, ...], problems_dir: str | Path | None = None) -> dict[str, list[str]]:
    """Tags of the named problems, read from the library (for records written without tags)."""
    return {name: list(prob.tags) for name, prob in library_problems(names, problems_dir).items()}


def library_explanations(names: tuple[str, ...], problems_dir: str | Path | None = None) -> dict[str, dict[str, str]]:
    """Each named problem's ``measured`` explanations (why profiled counters differ from its formulas)."""
    return {name: dict(prob.measured) for name, prob in library_problems(names, problems_dir).items() if prob.measured}
