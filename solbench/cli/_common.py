"""Small helpers shared by the command modules."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ..errors import ProblemError
from ..problem import Problem, find_problems, load_problem
from ..units import si

console = Console()
err_console = Console(stderr=True)

SHIPPED_PROBLEMS = Path(__file__).resolve().parent.parent.parent / "problems"


def default_problems_dir() -> Path:
    local = Path("problems")
    return local if local.is_dir() else SHIPPED_PROBLEMS


def resolve_problem(arg: str, problems_dir: Path | None = None) -> Problem:
    """A problem by path (file or folder) or by name (``llama3_1_8b.rmsnorm``)."""
    p = Path(arg)
    if p.exists():
        return load_problem(p)
    root = problems_dir or default_problems_dir()
    for f in find_problems(root) if root.is_dir() else []:
        # cheap name test before a full load: the folder layout is <family>/<op>
        if f"{f.parent.parent.name}.{f.parent.name}" == arg:
            return load_problem(f)
    for f in find_problems(root) if root.is_dir() else []:
        try:
            prob = load_problem(f)
        except ProblemError:
            continue
        if prob.name == arg:
            return prob
    raise ProblemError([f"problem {arg!r} not found: give a path to a problem.yaml or a name from `solbench list`"])


def fmt_time(t: float | None) -> str:
    return si(t, "s")
