"""Candidates: a Python file defining ``run(...)``.

The parent only describes a candidate file (name, path, hash) and never imports it; the worker
loads it with :func:`load_candidate`. Any failure while importing (syntax error, missing module,
an exception or ``sys.exit`` at import time) or a missing ``run`` is a :class:`CandidateLoadError`,
which the worker reports as ``COMPILE_ERROR``. A candidate that reuses another file next to it (its
``torch_eager.py``, a helper) loads it with :func:`load_sibling`, exported as ``solbench.load_sibling``.
"""

from __future__ import annotations

import hashlib
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from solbench.data.inputs import import_file, module_name
from solbench.errors import SolbenchError


class CandidateError(SolbenchError):
    """A candidate file given by the user does not exist or is not a Python file."""


class CandidateLoadError(Exception):
    """The candidate could not be imported, or defines no callable ``run``."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.message = message
        self.details = details


@dataclass(frozen=True)
class CandidateFile:
    """A candidate as the parent knows it: a file, a display name and the hash of its source."""

    path: Path
    name: str
    sha256: str

    @property
    def display_path(self) -> str:
        """The path relative to the current folder when it is below it (records hold no host paths)."""
        try:
            return self.path.relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            return self.path.as_posix()


def describe_candidates(paths: Iterable[str | Path]) -> list[CandidateFile]:
    """Check candidate files exist and give each a unique name (the file stem; parent folder on clashes)."""
    files = []
    for p in map(Path, paths):
        if not p.is_file():
            raise CandidateError(f"candidate {p} not found: pass --solution with a path to a .py file defining run()")
        if p.suffix != ".py":
            raise CandidateError(f"candidate {p} is not a .py file: a candidate is a Python file defining run()")
        files.append(p.resolve())
    stems = [f.stem for f in files]
    out = []
    for f in files:
        name = f.stem if stems.count(f.stem) == 1 else f"{f.parent.name}/{f.stem}"
        out.append(CandidateFile(f, name, hashlib.sha256(f.read_bytes()).hexdigest()))
    return out


def shipped_candidates(problem_folder: Path) -> list[Path]:
    """The candidates shipped with a problem: ``solutions/*.py`` next to its problem.yaml."""
    folder = problem_folder / "solutions"
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")) if folder.is_dir() else []


def load_sibling(file: str | Path, name: str) -> ModuleType:
    """Import the Python file ``name`` from the folder of ``file`` and return the module.

    For candidate authors: ``_eager = solbench.load_sibling(__file__, "torch_eager.py").run``. Each
    file gets a module name of its own, so the ``torch_eager.py`` of two problems never collide in
    one worker (a plain ``import torch_eager`` gives whichever was imported first), and the module
    counts as candidate code for the guards, like the candidate itself.
    """
    path = Path(file).resolve().parent / name
    if not path.is_file():
        raise FileNotFoundError(f"load_sibling: no file {name!r} next to {Path(file).name}")
    return import_file(path, module_name("solbench_candidate_sibling_", path))


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else text.strip()


def _import_failure(err: BaseException) -> CandidateLoadError:
    """Called while ``err`` is being handled (its traceback goes to the log)."""
    return CandidateLoadError(f"{type(err).__name__} while importing: {_last_line(str(err)) or type(err).__name__}",
                              traceback.format_exc())


def load_candidate(path: str | Path) -> Callable[..., Any]:
    """Import a candidate file by path and return its ``run``. Raises CandidateLoadError (worker side)."""
    path = Path(path)
    # Helper modules next to the candidate are importable; appended so they never shadow libraries.
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    try:
        module = import_file(path, module_name("solbench_candidate_", path))
    except ImportError as err:  # name None: the file itself is not a module; else an import inside it failed
        raise (CandidateLoadError(str(err)) if err.name is None else _import_failure(err)) from None
    except SyntaxError as err:
        where = f"line {err.lineno}" if err.lineno else "unknown line"
        raise CandidateLoadError(f"SyntaxError at {where}: {err.msg}", traceback.format_exc()) from None
    except SystemExit as err:
        raise CandidateLoadError(f"the candidate called sys.exit({err.code!r}) while being imported",
                                 traceback.format_exc()) from None
    except BaseException as err:  # anything at import time is the candidate's failure to load
        if isinstance(err, KeyboardInterrupt):
            raise
        raise _import_failure(err) from None
    run = getattr(module, "run", None)
    if run is None:
        raise CandidateLoadError(f"{path.name} defines no run(); a candidate must define run(...) with the "
                                 "reference's arguments")
    if not callable(run):
        raise CandidateLoadError(f"{path.name}: run is a {type(run).__name__}, not a function")
    return run

