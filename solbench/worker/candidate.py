"""Candidates: a Python file defining ``run(...)`` (and optionally ``setup(...)``), or a ``.cu`` file.

The parent only describes a candidate file (name, path, hash) and never imports it; the worker
loads it with :func:`load_candidate`. Any failure while importing (syntax error, missing module,
an exception or ``sys.exit`` at import time) or a missing ``run`` is a :class:`CandidateLoadError`,
which the worker reports as ``COMPILE_ERROR``; so is a ``run`` whose signature cannot take the problem's
inputs (checked before any call, :func:`signature_mismatch`; the parent reads the same from the file's
source without running it, :func:`source_run_mismatch`). A candidate that reuses another file next to it (its
``torch_eager.py``, a helper) loads it with :func:`load_sibling`, exported as ``solbench.load_sibling``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from solbench.errors import SolbenchError

CANDIDATE_SUFFIXES = (".py", ".cu")  # Python candidates, and CUDA C++ ones (worker/cuda_source.py)


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



def module_name(prefix: str, path: Path) -> str:
    """A module name unique to a file: ``prefix`` + a digest of its path."""
    return f"{prefix}{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"


def import_file(path: Path, mod_name: str) -> Any:
    """Import a Python file as module ``mod_name`` (registered in sys.modules); ImportError if it is
    not a Python module. What the file itself raises propagates. The one loader of the layers that
    run code: the candidate worker, the problem host, the KernelBench import."""
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path.name} cannot be imported as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def describe_candidates(paths: Iterable[str | Path]) -> list[CandidateFile]:
    """Check candidate files exist and give each a unique name (the file stem; parent folder on clashes)."""
    files = []
    for p in map(Path, paths):
        if not p.is_file():
            raise CandidateError(f"candidate {p} not found: pass --solution with a path to a .py file defining run()")
        if p.suffix not in CANDIDATE_SUFFIXES:
            raise CandidateError(f"candidate {p} is neither a .py nor a .cu file: a candidate is a Python file "
                                 "defining run(), or a CUDA C++ file exposing run (README, 'The candidate file')")
        files.append(p.resolve())
    stems = [f.stem for f in files]
    out = []
    for f in files:
        name = f.stem if stems.count(f.stem) == 1 else f"{f.parent.name}/{f.stem}"
        out.append(CandidateFile(f, printable_name(name), hashlib.sha256(f.read_bytes()).hexdigest()))
    return out


def printable_name(name: str) -> str:
    """A file name as it is shown and recorded: control characters escaped (``\\n``, ``\\x1b``), so a
    name with a newline cannot start a line of its own in the progress output or a log."""
    return name if name.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


DEVICE_REQUIREMENT = "device:cuda"  # in REQUIRES: the candidate runs only where a CUDA device is present


def _module_constant(path: Path, name: str) -> Any:
    """The literal value of a top-level ``NAME = ...`` of a candidate file (read with ast, never imported);
    None when the file does not parse or the name is not a literal."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _absent(requirement: str) -> bool:
    import importlib.util

    if requirement == DEVICE_REQUIREMENT:
        import torch

        return not torch.cuda.is_available()
    try:
        return importlib.util.find_spec(requirement) is None
    except ModuleNotFoundError:  # a dotted name ("flash_attn.cute") whose parent package is absent
        return True


def _imports_triton(path: Path) -> bool:
    """Whether a candidate imports Triton at its top level (read with ast, never imported)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return False
    return any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "triton" for a in n.names)
               or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "triton" for n in tree.body)


def missing_requirements(path: Path) -> list[str]:
    """What a candidate's ``REQUIRES = [...]`` names that this machine lacks: modules not installed, or
    ``"device:cuda"`` without a CUDA device. Library baselines (``lib_*.py``) are skipped, not failed,
    without their library. A Triton candidate needs a GPU (``device:cuda``) unless Triton's
    interpreter is on (``TRITON_INTERPRET=1``): without one its first launch fails with "0 active drivers"."""
    names = _module_constant(path, "REQUIRES")
    names = [str(n) for n in names] if isinstance(names, (list, tuple)) else []
    if (DEVICE_REQUIREMENT not in names and os.environ.get("TRITON_INTERPRET") != "1" and path.suffix == ".py"
            and _imports_triton(path)):
        names.append(DEVICE_REQUIREMENT)
    return [n for n in names if _absent(n)]


def baseline_library(path: Path) -> str | None:
    """The library (its distribution name) a baseline candidate declares with ``BASELINE = "name"``."""
    name = _module_constant(path, "BASELINE") if path.suffix == ".py" else None
    return name if isinstance(name, str) and name else None


def baseline_of(path: Path) -> dict[str, str] | None:
    """``{library, version}`` of a baseline candidate (version ``unknown`` when not installed); None for others."""
    from importlib import metadata

    library = baseline_library(path)
    if library is None:
        return None
    try:
        version = metadata.version(library)
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"library": library, "version": version}


def _solution_files(problem_folder: Path) -> list[Path]:
    folder = problem_folder / "solutions"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in CANDIDATE_SUFFIXES and not p.name.startswith("_"))


def shipped_candidates(problem_folder: Path) -> list[Path]:
    """The candidates shipped with a problem: ``solutions/*.py`` and ``*.cu`` next to its problem.yaml,
    but those whose ``REQUIRES`` names a module not installed (:func:`skipped_candidates`)."""
    return [p for p in _solution_files(problem_folder) if not (p.suffix == ".py" and missing_requirements(p))]


def skipped_candidates(problem_folder: Path) -> list[tuple[Path, list[str]]]:
    """The shipped candidates left out for a missing module, each with the modules it lacks."""
    found = [(p, missing_requirements(p)) for p in _solution_files(problem_folder) if p.suffix == ".py"]
    return [(p, missing) for p, missing in found if missing]


def skipped_line(problem: str, path: Path, missing: list[str]) -> str:
    """The one line a run prints for a shipped candidate it leaves out (never a silent skip)."""
    if missing == [DEVICE_REQUIREMENT]:
        return f"skipped: {problem} {path.name}: needs a CUDA device, none here"
    modules = ", ".join(m for m in missing if m != DEVICE_REQUIREMENT)
    return f"skipped: {problem} {path.name}: needs {modules}, not installed here (install it to run this candidate)"


def load_sibling(file: str | Path, name: str) -> ModuleType:
    """Import the Python file ``name`` from the folder of ``file`` and return the module.

    For candidate authors: ``_eager = solbench.load_sibling(__file__, "torch_eager.py").run``. Each
    file gets a module name of its own, so the ``torch_eager.py`` of two problems never collide in
    one worker (a plain ``import torch_eager`` gives whichever was imported first), and the module
    counts as candidate code for the guards, like the candidate itself. ``name`` is a path below the
    candidate's folder (no ``..``, not absolute).
    """
    folder = Path(file).resolve().parent
    path = folder / name
    if Path(name).is_absolute() or ".." in Path(name).parts:  # what a JIT-cache key covers is the folder
        raise ValueError(f"load_sibling: {name!r} is not a file below the folder of {Path(file).name}")
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


def _import_candidate(path: Path) -> ModuleType:
    """Import a Python candidate, or build a ``.cu`` one; any failure is a CandidateLoadError."""
    if path.suffix == ".cu":
        from solbench.worker.cuda_source import CudaBuildError, build_cuda_candidate

        try:
            return build_cuda_candidate(path)
        except CudaBuildError as err:
            raise CandidateLoadError(f"{path.name} does not compile: {err}", err.log) from None
    # Helper modules next to the candidate are importable; appended so they never shadow libraries.
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    try:
        return import_file(path, module_name("solbench_candidate_", path))
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


def load_entry_points(path: str | Path) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """Import (or build) a candidate and return ``(run, setup)``; ``setup`` is None when the file
    defines none. Raises CandidateLoadError (worker side)."""
    path = Path(path)
    module = _import_candidate(path)
    run = getattr(module, "run", None)
    if run is None:
        raise CandidateLoadError(f"{path.name} defines no run(); a candidate must define run(...) with the "
                                 "reference's arguments")
    if not callable(run):
        raise CandidateLoadError(f"{path.name}: run is a {type(run).__name__}, not a function")
    setup = getattr(module, "setup", None)
    if setup is not None and not callable(setup):
        raise CandidateLoadError(f"{path.name}: setup is a {type(setup).__name__}, not a function")
    return run, setup


def _arity_text(params: str, why: str, inputs: Sequence[str], problem: str) -> str:
    gives = f"{len(inputs)} input{'s' if len(inputs) != 1 else ''} ({', '.join(inputs)})"
    return (f"run({params}) cannot take the {gives} that {problem or 'the problem'} passes, in that order "
            f"({why}): give run() one parameter per input")


def signature_mismatch(run: Callable[..., Any], inputs: Sequence[str], problem: str = "") -> str | None:
    """Why ``run`` cannot be called with the problem's inputs (given positionally), or None when it can
    (or when its signature cannot be read: a C function, a compiled wrapper)."""
    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(len(inputs)))
    except TypeError as err:
        return _arity_text(", ".join(sig.parameters), str(err), inputs, problem)
    return None


def check_entry_points(path: str | Path, run: Callable[..., Any], setup: Callable[..., Any] | None,
                       inputs: Sequence[str] | None, problem: str = "") -> None:
    """Raise CandidateLoadError when ``run`` (or ``setup``) cannot take the problem's ``inputs``; no
    check when the parent sent none."""
    if inputs is None:
        return
    for name, fn in (("run", run), ("setup", setup)):
        mismatch = signature_mismatch(fn, inputs, problem) if fn is not None else None
        if mismatch:
            raise CandidateLoadError(f"{Path(path).name}: {mismatch.replace('run(', name + '(', 1)}")


def source_run_mismatch(path: Path, inputs: Sequence[str], problem: str = "") -> str | None:
    """The same check read from the file's source, never run: None unless a plain top-level ``def run``
    (not rebound later) certainly cannot take ``len(inputs)`` positional arguments."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "run"]
    bound = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "run" and isinstance(n.ctx, ast.Store)]
    if len(defs) != 1 or bound or defs[0].decorator_list:
        return None
    args = defs[0].args
    positional = [*args.posonlyargs, *args.args]
    required = len(positional) - len(args.defaults)
    kw_required = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    n = len(inputs)
    if n >= required and (n <= len(positional) or args.vararg) and not kw_required:
        return None
    names = [a.arg for a in positional] + ([f"*{args.vararg.arg}"] if args.vararg else [])
    why = (f"it needs keyword argument(s) {', '.join(kw_required)}" if kw_required else
           f"it takes {required if required == len(positional) else f'{required} to {len(positional)}'} "
           "positional argument(s)")
    return _arity_text(", ".join(names), why, inputs, problem)


def load_candidate(path: str | Path) -> Callable[..., Any]:
    """Import a candidate file by path and return its ``run``. Raises CandidateLoadError (worker side)."""
    return load_entry_points(path)[0]

