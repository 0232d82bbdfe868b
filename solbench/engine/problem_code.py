"""A problem's own code, run in this process: its reference, input generator and cost hook, and
FlopCounterMode over the reference.

Only the problem host (:mod:`solbench.engine.problem_host`, a sandboxed process) imports this to serve
the parent; the parent never calls it (tests do, on the shipped problems, which they trust). Loading
checks again that each file lies inside the problem's folder (validation checked it when the problem
was read).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from solbench.data import COST_SEED, Cost, Problem, cost_from_result, inside_folder
from solbench.data import make_inputs as _assemble_inputs
from solbench.errors import ProblemError, SolbenchError
from solbench.worker import import_file, module_name


def load_module(path: Path, name_hint: str = "ref") -> Any:
    """Import a problem's Python file (reference, generator, cost hook) under a unique module name."""
    try:
        return import_file(path, module_name(f"_solbench_{name_hint}_", path.resolve()))
    except ImportError as err:
        if err.name is not None:  # an import inside the file failed: the file's own error
            raise
        raise ProblemError([f"{path}: cannot be imported"]) from None


def _real_file(problem: Problem, key: str, ref: str) -> Path:
    """The real path of a reference, generator or hook file, checked again at import."""
    file = ref.rpartition(":")[0]
    real = inside_folder(problem, file)
    if real is None:
        raise ProblemError([f"{problem.path or problem.name}: {key}: {file!r} resolves outside the problem's folder"])
    return real


def load_reference(problem: Problem) -> Callable[..., Any]:
    mod = load_module(_real_file(problem, "reference", problem.reference), "ref")
    return getattr(mod, problem.reference_function)


def load_generator(problem: Problem) -> Callable[..., dict] | None:
    if not problem.input_generator:
        return None
    mod = load_module(_real_file(problem, "input_generator", problem.input_generator), "gen")
    return getattr(mod, problem.generator_function)  # type: ignore[arg-type]


def load_cost(problem: Problem) -> Callable[..., Any]:
    """The problem's cost function (imported from its folder, like the reference)."""
    if problem.cost is None:
        raise ProblemError([f"{problem.name}: no cost hook (cost: file.py:function)"])
    mod = load_module(_real_file(problem, "cost", problem.cost), "cost")
    return getattr(mod, problem.cost_function)  # type: ignore[arg-type]


def make_inputs(problem: Problem, axes: dict[str, int], seed: int, device: str = "cpu",
                scalars: dict[str, Any] | None = None, placeholders: bool = False,
                generator_fn: Callable[..., dict] | None = None) -> dict[str, Any]:
    """:func:`solbench.data.inputs.make_inputs` with the problem's own generator, loaded here."""
    fn = generator_fn if generator_fn is not None else load_generator(problem)
    return _assemble_inputs(problem, axes, seed, device=device, generator_fn=fn, scalars=scalars,
                            placeholders=placeholders)


def call_cost(problem: Problem, fn: Callable[..., Any], axes: dict[str, int], inputs: dict[str, Any]) -> Cost:
    """Call the hook and check what it returns (:func:`solbench.data.cost.cost_from_result`)."""
    try:
        result = fn(dict(axes), dict(inputs))
    except Exception as err:  # noqa: BLE001 - the problem's own code: one line naming it
        first = str(err).splitlines()[0][:300] if str(err) else ""  # a hook's message may be megabytes
        hint = (" (it read the values of an input its generator does not make; only generated inputs and "
                "scalars have values in sol and list)") if "meta" in first.lower() else ""
        raise ProblemError([f"{problem.name}: cost hook {problem.cost} raised {type(err).__name__}: {first}{hint}"]) \
            from None
    return cost_from_result(problem, result)


def workload_cost(problem: Problem, axes: dict[str, int], scalars: dict[str, Any] | None = None) -> Cost:
    """The hook on the seed-:data:`COST_SEED` inputs of these axes (meta tensors for inputs the
    generator does not make): what ``sol`` and ``list`` show."""
    inputs = make_inputs(problem, axes, COST_SEED, device="cpu", scalars=scalars or {}, placeholders=True)
    return call_cost(problem, load_cost(problem), axes, inputs)


def _meta_inputs(problem: Problem, axes: dict[str, int]) -> list[Any]:
    import torch

    from solbench.data import torch_dtype

    args = []
    for name, spec in problem.inputs.items():
        shape = problem.shape(name, axes)
        if shape is None:
            args.append(spec.value)
        else:
            args.append(torch.zeros(shape, dtype=torch_dtype(spec.dtype), device="meta"))
    return args


def count_reference_flops(problem: Problem, axes: dict[str, int], device: str = "meta") -> int:
    """FLOPs FlopCounterMode sees when the reference runs at these axes (``flops: auto``, and
    ``validate --deep``'s cross-check of a formula).

    FlopCounterMode counts matmuls, convolutions and SDPA at 2 FLOPs per multiply-add; elementwise
    ops count 0, and causal attention is counted as the full square. On ``meta`` nothing is computed,
    so any size is cheap; ``device='cpu'`` runs it for real (with generated inputs), for references
    that do not run on meta tensors.
    """
    from torch.utils.flop_counter import FlopCounterMode

    ref = load_reference(problem)
    if device == "meta":
        args = _meta_inputs(problem, axes)
    else:
        args = list(make_inputs(problem, axes, seed=0, device=device).values())
    try:
        with FlopCounterMode(display=False) as counter:
            ref(*args)
    except Exception as err:  # noqa: BLE001 - any failure means "cannot count here"
        raise ProblemError([f"{problem.name}: flops could not be counted on {device} tensors "
                            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                            "write an analytic flops expression"]) from None
    return int(counter.get_total_flops())


def deep_check(problem: Problem, rel_tol: float = 0.01) -> list[str]:
    """``validate --deep``: the FLOPs formula against FlopCounterMode on meta tensors (a cost hook:
    :func:`check_cost_hook`). One line per finding.

    Compared where FlopCounterMode counts something (matmul, conv, SDPA problems); a problem tagged
    ``causal`` may be counted at up to 2x. Where it counts nothing (elementwise work), the formula
    must stay under ``ELEMENTWISE_FLOPS_PER_BYTE`` per byte moved.
    """
    if problem.cost is not None:
        return check_cost_hook(problem, rel_tol)
    if problem.flops == "auto":
        return []
    errs: list[str] = []
    label = problem.path or problem.name
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
        if counted == 0:
            errs += _elementwise_bound(problem, axes, where, label)
        else:
            declared = problem.flops_for(axes)
            ratio = counted / declared if declared else float("inf")
            lo, hi = (1 - rel_tol, 2.0 + rel_tol) if "causal" in problem.tags else (1 - rel_tol, 1 + rel_tol)
            if not lo <= ratio <= hi:
                errs.append(f"{label}: flops: declared {declared:.4g} but FlopCounterMode counts {counted:.4g} "
                            f"on workload {where} (ratio {ratio:.3f})")
        if where != w.name:
            break
    return errs


# Where FlopCounterMode counts nothing (elementwise work, reductions, gathers), a formula above this many
# FLOPs per byte the op moves (``bytes: auto``) is a typo: a transcendental is a few dozen FLOPs.
ELEMENTWISE_FLOPS_PER_BYTE = 64


def _elementwise_bound(problem: Problem, axes: dict[str, int], where: str, label: object) -> list[str]:
    declared, moved = problem.flops_for(axes), problem.auto_bytes(axes)
    if declared <= ELEMENTWISE_FLOPS_PER_BYTE * max(moved, 1):
        return []
    return [f"{label}: flops: declared {declared:.4g} on workload {where}, but FlopCounterMode counts no matmul, "
            f"conv or attention in the reference, and elementwise work does at most ~{ELEMENTWISE_FLOPS_PER_BYTE} "
            f"FLOPs per byte moved ({moved:.4g} bytes here): check the formula"]


def check_cost_hook(problem: Problem, rel_tol: float = 0.01) -> list[str]:
    """``validate --deep`` for a cost hook: one line per finding.

    * every workload: bytes at most ``bytes: auto`` (each input read once, each output written once),
      the upper bound of a kernel that reads only what it needs;
    * at the test axes, on real CPU inputs: the same cost as from placeholders (the hook reads only
      generated values), and FLOPs within ``rel_tol`` of what FlopCounterMode counts when the
      reference runs on those inputs (where it counts anything; up to 2x for a problem tagged ``causal``
      or ``masked``, whose masked-out pairs the reference computes and FlopCounterMode counts).
    """
    label, errs = problem.path or problem.name, []
    for w in problem.workloads:
        axes = problem.resolve_axes(w)
        c, upper = workload_cost(problem, axes, problem.scalars_for(w)), problem.auto_bytes(axes)
        if c.bytes > upper:
            errs.append(f"{label}: cost: workload {w.name}: {c.bytes} bytes, more than bytes: auto ({upper}), "
                        "which reads every input once and writes every output once")
    axes, w = problem.test_axes_resolved(), problem.workloads[0]
    scalars = problem.scalars_for(w)
    real = call_cost(problem, load_cost(problem), axes, make_inputs(problem, axes, COST_SEED, scalars=scalars))
    placeholder = workload_cost(problem, axes, scalars)
    if real != placeholder:
        errs.append(f"{label}: cost: at the test axes the hook gives {real} on real inputs but "
                    f"{placeholder} on placeholders; it must read only generated inputs")
    counted = count_reference_flops(problem, axes, device="cpu")
    if counted and real.flops:
        ratio, hi = counted / real.flops, (2.0 if {"causal", "masked"} & set(problem.tags) else 1.0) + rel_tol
        if not 1 - rel_tol <= ratio <= hi:
            errs.append(f"{label}: cost: {real.flops} FLOPs at the test axes but FlopCounterMode counts {counted} "
                        f"(ratio {ratio:.3f})")
    return errs
