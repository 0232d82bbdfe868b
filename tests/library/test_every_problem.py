"""Every shipped problem: validates, its reference runs on the CPU at a tiny size with the declared
outputs, every floating input matters, the output is not near-constant, the shipped eager
candidate passes the tolerance, and analytic FLOPs agree with FlopCounterMode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from solbench.data.dtypes import torch_dtype
from solbench.data.problem import Problem, find_problems, load_problem
from solbench.engine.problem_code import load_module, load_reference, make_inputs

ROOT = Path(__file__).resolve().parents[2]
PROBLEM_FILES = find_problems(ROOT / "problems")
IDS = [f"{p.parent.parent.name}.{p.parent.name}" for p in PROBLEM_FILES]


def _outputs(problem: Problem, result) -> dict[str, torch.Tensor]:
    names = list(problem.outputs)
    if isinstance(result, torch.Tensor):
        result = (result,)
    assert isinstance(result, (tuple, list)), f"reference returned {type(result).__name__}"
    assert len(result) == len(names), f"reference returned {len(result)} outputs, declared {len(names)}"
    return dict(zip(names, result, strict=True))


def _close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    if a.dtype == torch.bool or not a.dtype.is_floating_point:
        return torch.equal(a, b)
    a64, b64 = a.double(), b.double()
    return bool(((a64 - b64).abs() <= atol + rtol * b64.abs()).all())


@pytest.fixture(scope="module", params=PROBLEM_FILES, ids=IDS)
def case(request):
    problem = load_problem(request.param)
    axes = problem.test_axes_resolved()
    ref = load_reference(problem)
    inputs = make_inputs(problem, axes, seed=1234, device="cpu")
    pristine = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    outs = _outputs(problem, ref(*pristine.values()))
    return problem, axes, ref, inputs, outs


def test_library_is_not_empty():
    assert PROBLEM_FILES, "no problems found under problems/"


def test_reference_outputs_match_declaration(case):
    problem, axes, _, _, outs = case
    for name, spec in problem.outputs.items():
        t = outs[name]
        assert type(t) is torch.Tensor
        assert tuple(t.shape) == problem.shape(name, axes), name
        assert t.dtype == torch_dtype(spec.dtype), name


def test_output_is_not_degenerate(case):
    problem, _, _, _, outs = case
    for name, t in outs.items():
        assert t.numel() > 0
        if t.dtype.is_floating_point:
            v = t.double()
            assert torch.isfinite(v).all(), f"{name} has non-finite values"
            if v.numel() > 1:
                assert v.std() > 1e-3 * (v.abs().mean() + 1e-12), f"{name} is near-constant"
            assert v.abs().max() > 10 * problem.tolerance.atol, (
                f"{name}: max |out| {v.abs().max():.3g} is within 10x atol, so zeros could pass"
            )


def test_every_float_input_matters(case):
    """Redrawing any floating input must change the output beyond the tolerance."""
    problem, axes, ref, inputs, outs = case
    tol = problem.tolerance
    for name, val in inputs.items():
        if not isinstance(val, torch.Tensor) or not val.dtype.is_floating_point:
            continue
        other = make_inputs(problem, axes, seed=99, device="cpu")[name]
        changed = dict(inputs)
        changed[name] = other
        new = _outputs(problem, ref(*[v.clone() if isinstance(v, torch.Tensor) else v for v in changed.values()]))
        assert any(not _close(new[o], outs[o], tol.atol, tol.rtol) for o in outs), (
            f"redrawing input {name!r} leaves every output within tolerance: it does not matter"
        )


def test_eager_solution_passes(case):
    problem, axes, _, inputs, outs = case
    eager = problem.folder / "solutions" / "torch_eager.py"
    assert eager.is_file(), "every problem ships solutions/torch_eager.py"
    run = load_module(eager, "cand").run
    got = _outputs(problem, run(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()]))
    tol = problem.tolerance_for(problem.workloads[0])
    for name in outs:
        assert got[name].shape == outs[name].shape
        assert _close(got[name], outs[name], tol.atol, tol.rtol), f"torch_eager output {name} fails tolerance"


COUNTED_TAGS = {"gemm", "attention", "conv", "moe"}


def test_flops_formula_matches_flop_counter(case):
    """Where FlopCounterMode counts the work (matmul, conv, SDPA), the formula agrees within 1%."""
    from torch.utils.flop_counter import FlopCounterMode

    problem, axes, ref, inputs, _ = case
    if problem.flops == "auto" or not COUNTED_TAGS & set(problem.tags) or "backward" in problem.tags:
        pytest.skip("no matmul-type work to cross-check")
    with FlopCounterMode(display=False) as counter:
        ref(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()])
    counted = counter.get_total_flops()
    if counted == 0:
        pytest.skip("FlopCounterMode counts nothing for this reference")
    if problem.cost is not None:  # data-dependent work: the hook's count for these very inputs
        from solbench.engine.problem_code import call_cost, load_cost

        declared = call_cost(problem, load_cost(problem), axes, inputs).flops
    else:
        declared = problem.flops_for(axes)
    ratio = counted / declared
    # The reference of a causal or masked problem computes the masked-out pairs, which FlopCounterMode counts.
    hi = 2.0 + 0.01 if {"causal", "masked"} & set(problem.tags) else 1.01
    assert 0.99 <= ratio <= hi, f"declared {declared} FLOPs, FlopCounterMode counts {counted} (ratio {ratio:.4f})"
