"""`solbench validate`: check problem and spec files, one line per error (file, key, why)."""

from __future__ import annotations

from pathlib import Path

from solbench.data.hardware import load_spec_file
from solbench.data.problem import load_problem
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


def validate_paths(paths: list[str | Path], deep: bool = False) -> tuple[int, list[str]]:
    """Validate every file; returns (number of files checked, error lines)."""
    files, errs = collect_files(paths)
    for f in files:
        try:
            if _kind(f) == "spec":
                load_spec_file(f)
            else:
                problem = load_problem(f)
                if deep:
                    errs.extend(deep_check(problem))
        except SolbenchError as err:
            errs.extend(getattr(err, "errors", None) or [str(err)])
    return len(files), errs


def deep_check(problem, rel_tol: float = 0.01) -> list[str]:  # noqa: ANN001
    """Checks that run the reference: FLOPs formula vs FlopCounterMode on meta tensors (a cost hook:
    :func:`solbench.data.cost.check_cost_hook`).

    Only reported where FlopCounterMode counts something (matmul, conv, SDPA problems), since it
    counts elementwise work as 0; a problem tagged ``causal`` may be counted at up to 2x.
    """
    from solbench.data.flopcount import count_reference_flops

    if problem.cost is not None:
        from solbench.data.cost import check_cost_hook

        return check_cost_hook(problem, rel_tol)
    errs = []
    label = problem.path or problem.name
    if problem.flops == "auto":
        return errs
    for w in problem.workloads:
        axes, where = problem.resolve_axes(w), w.name
        try:
            counted = count_reference_flops(problem, axes)
        except SolbenchError as err:
            # Data-dependent references (MoE routing, group sizes) cannot run on meta tensors: count
            # one real run on the CPU at the problem's small test axes instead, once for all workloads.
            axes, where = problem.test_axes_resolved(), "test_axes (CPU run)"
            try:
                counted = count_reference_flops(problem, axes, device="cpu")
            except SolbenchError:
                errs.append(f"{label}: workloads.{w.name}: {err}")
                continue
        if counted != 0:
            declared = problem.flops_for(axes)
            ratio = counted / declared if declared else float("inf")
            lo, hi = (1 - rel_tol, 2.0 + rel_tol) if "causal" in problem.tags else (1 - rel_tol, 1 + rel_tol)
            if not lo <= ratio <= hi:
                errs.append(f"{label}: flops: declared {declared:.4g} but FlopCounterMode counts {counted:.4g} "
                            f"on workload {where} (ratio {ratio:.3f})")
        if where != w.name:
            break
    return errs
