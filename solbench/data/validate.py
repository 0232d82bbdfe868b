"""`solbench validate`: check problem and spec files, one line per error (file, key, why)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from solbench.data.hardware import load_spec_file
from solbench.data.problem import Problem, load_problem
from solbench.data.yamlio import YamlError, read_yaml_mapping
from solbench.errors import SolbenchError


def _kind(path: Path) -> str:
    if path.name == "problem.yaml":
        return "problem"
    if path.parent.name == "hardware_specs":
        return "spec"
    try:
        data = read_yaml_mapping(path)
    except YamlError:
        return "problem"  # reported by the problem loader with the YAML reason
    return "spec" if "peak_flops" in data else "problem"


def collect_files(paths: list[str | Path]) -> tuple[list[Path], list[str]]:
    """YAML files under the given paths; and errors for paths that do not exist."""
    files: list[Path] = []
    errs: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("problem.yaml"))
            found += sorted(f for f in p.rglob("*.yaml") if f.parent.name == "hardware_specs"
                            or (p.name == "hardware_specs" and f.parent == p))
            if not found:
                errs.append(f"{p}: no problem.yaml or spec files found in this folder")
            files.extend(sorted(set(found)))
        elif p.is_file():
            files.append(p)
        else:
            errs.append(f"{p}: no such file or folder")
    return files, errs


def validate_paths(paths: list[str | Path],
                   check: Callable[[Problem], list[str]] | None = None) -> tuple[int, list[str]]:
    """Validate every file; returns (number of files checked, error lines). ``check``: more checks of
    each valid problem, one line per finding (``validate --deep``: the engine's, which runs the
    problem's code in its sandboxed host, :func:`solbench.engine.work.deep_check`)."""
    files, errs = collect_files(paths)
    for f in files:
        try:
            if _kind(f) == "spec":
                load_spec_file(f)
            else:
                problem = load_problem(f)
                if check is not None:
                    errs.extend(check(problem))
        except SolbenchError as err:
            errs.extend(getattr(err, "errors", None) or [str(err)])
    return len(files), errs
