"""The cost hook and the format additions it came with: constraints, per-workload scalars, the
mismatch allowance's reason, fp4 dtypes; the hook's numbers in `sol --json`, in `list` and in run records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

import solbench
from solbench.cli import app
from solbench.data.cost import COST_SEED
from solbench.data.dtypes import unpack_fp4
from solbench.data.inputs import default_tensor
from solbench.data.problem import load_problem, problem_from_dict
from solbench.engine.problem_code import (
    call_cost,
    load_cost,
    load_generator,
    load_reference,
    make_inputs,
    workload_cost,
)
from solbench.engine.work import deep_check, workload_work
from solbench.errors import ProblemError

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
RAGGED = TINY / "ragged_sum"
ROOT = Path(__file__).resolve().parents[2]


def _ragged(tmp_path: Path, **changes) -> Path:
    """A copy of the ragged_sum fixture with top-level keys changed (None removes one)."""
    data = yaml.safe_load((RAGGED / "problem.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    folder = tmp_path / "ragged"
    folder.mkdir(exist_ok=True)
    (folder / "reference.py").write_text((RAGGED / "reference.py").read_text())
    (folder / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def _errors(path: Path) -> list[str]:
    with pytest.raises(ProblemError) as err:
        load_problem(path)
    return err.value.errors


def _rows_used(indptr: torch.Tensor) -> int:
    return sum(int(b) - int(a) for a, b in zip(indptr.tolist(), indptr.tolist()[1:], strict=False))


def test_cost_hook_counts_the_actual_rows():
    p = load_problem(RAGGED)
    axes = p.resolve_axes(p.workload("b8"))
    inputs = make_inputs(p, axes, seed=5)
    rows = _rows_used(inputs["indptr"])
    assert call_cost(p, load_cost(p), axes, inputs).flops == rows * 16
    other = make_inputs(p, axes, seed=6)
    assert call_cost(p, load_cost(p), axes, other).bytes == _rows_used(other["indptr"]) * 64 + 8 * 9 + 8 * 64
    assert p.auto_bytes(axes) > call_cost(p, load_cost(p), axes, other).bytes  # the pool of rows is larger than what is used


def test_sol_json_gives_the_hook_on_seed_zero_inputs():
    p = load_problem(RAGGED)
    axes = p.resolve_axes(p.workload("b8"))
    rows = _rows_used(make_inputs(p, axes, seed=COST_SEED)["indptr"])
    res = CliRunner().invoke(app, ["sol", str(RAGGED), "--gpu", "h200_sxm", "--workload", "b8", "--json"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)[0]
    assert (row["flops"], row["bytes"]) == (rows * 16, rows * 64 + 8 * 9 + 8 * 64)


def test_list_uses_the_hook_too():
    res = CliRunner().invoke(app, ["list", "--problems", str(TINY), "--format", "json"])
    assert res.exit_code == 0, res.output
    entry = next(r for r in json.loads(res.output) if r["name"] == "tiny.ragged_sum")
    p = load_problem(RAGGED)
    pt = solbench.workload_point(p, "b4", solbench.load_spec("h200_sxm"))
    assert entry["workloads"][0]["t_ideal_s"] == pytest.approx(pt.t_ideal_s)


def test_run_records_carry_the_mean_cost_of_the_timed_sets(tmp_path):
    from solbench.engine.cases import prepare_cases

    p = load_problem(RAGGED)
    out = tmp_path / "r.jsonl"
    result = solbench.run_problems([RAGGED], [RAGGED / "solutions" / "torch_eager.py"], device="cpu", output=out,
                                   budget_s=0.05, seed=11, workloads=["b4"], rounds=3)
    (rec,) = result.records
    assert rec.status == "PASSED", rec.reason
    cases = prepare_cases(p, p.workload("b4"), base_seed=11, device="cpu", rounds=3,
                          ref_fn=load_reference(p), gen_fn=load_generator(p))
    rows = [_rows_used(c.inputs["indptr"]) for c in cases.sets]
    assert rec.flops == round(sum(rows) * 16 / len(rows))
    assert rec.cost["sets"] == len(rows) and rec.cost["flops_min"] == min(rows) * 16
    assert rec.cost["flops_max"] == max(rows) * 16 and rec.cost["hook"] == "reference.py:cost"
    # The workload's scalar (scale 0.5) reached the inputs: the eager candidate passed against it.
    assert cases.rounds[0].inputs["scale"] == 0.5


def test_validate_deep_checks_the_hook(tmp_path):
    assert deep_check(load_problem(RAGGED)) == []
    folder = _ragged(tmp_path)
    ref = folder / "reference.py"
    # A hook that reads the values of x, which the generator does not make: a meta placeholder in sol/list.
    ref.write_text(ref.read_text().replace('rows = int(inputs["indptr"][-1])',
                                           'rows = int(inputs["indptr"][-1]) + int(inputs["x"][0, 0] > 9)'))
    p = load_problem(folder)
    with pytest.raises(ProblemError, match="only generated inputs and scalars have values"):
        workload_work(p, p.resolve_axes(p.workloads[0]), p.workloads[0])


def test_validate_deep_flags_bytes_above_auto(tmp_path):
    folder = _ragged(tmp_path)
    ref = folder / "reference.py"
    ref.write_text(ref.read_text().replace('rows = int(inputs["indptr"][-1])', 'rows = int(inputs["indptr"][-1]) * 40'))
    errs = deep_check(load_problem(folder))
    assert any("more than bytes: auto" in e for e in errs), errs


@pytest.mark.parametrize("changes, expected", [
    ({"flops": "N * D"}, "flops: the cost hook replaces flops and bytes; remove flops"),
    ({"cost": None}, "flops: required"),
    ({"cost": "reference.py:nope"}, "cost: reference.py defines no top-level function 'nope'"),
    ({"constraints": ["N >= 64 * B"]}, "constraints[0]: 'N >= 64 * B' does not hold (B=4, N=64)"),
    ({"constraints": ["Q == B"]}, "constraints[0]: unknown axes ['Q']"),
    ({"constraints": ["N + B"]}, "must compare expressions"),
    ({"tolerance": {"atol": 1e-4, "rtol": 1e-4, "max_mismatch_ratio": 0.05}}, "say why in mismatch_reason"),
])
def test_format_errors_name_the_key(tmp_path, changes, expected):
    errs = _errors(_ragged(tmp_path, **changes))
    assert any(expected in e for e in errs), errs


def test_mismatch_allowance_with_a_reason_loads(tmp_path):
    tol = {"atol": 1e-4, "rtol": 1e-4, "max_mismatch_ratio": 0.05, "mismatch_reason": "fp4 rounding flips ties"}
    assert load_problem(_ragged(tmp_path, tolerance=tol)).tolerance.max_mismatch_ratio == 0.05


@pytest.mark.parametrize("scalars, expected", [
    ({"scale": "big"}, "workloads.0.inputs.scale"),
    ({"x": 1.0}, "not a scalar input"),
    ({"scale": True}, "is a boolean"),
])
def test_workload_scalars_are_checked(tmp_path, scalars, expected):
    data = yaml.safe_load((RAGGED / "problem.yaml").read_text())
    data["workloads"][0]["inputs"] = scalars
    with pytest.raises(ProblemError) as err:
        problem_from_dict(data, RAGGED / "problem.yaml")
    assert any(expected in e for e in err.value.errors), err.value.errors


def test_workload_scalars_reach_the_inputs():
    p = load_problem(RAGGED)
    assert p.scalars_for("b4") == {"scale": 0.5} and p.scalars_for("b8") == {"scale": 1.0}
    axes = p.resolve_axes(p.workload("b4"))
    assert make_inputs(p, axes, 1, scalars=p.scalars_for("b4"))["scale"] == 0.5


def test_fp4_inputs_generate_and_unpack():
    t = default_tensor((3, 8), "float4_e2m1fn_x2", seed=1, device="cpu")
    assert t.dtype == torch.float4_e2m1fn_x2 and t.shape == (3, 8)
    values = unpack_fp4(t)
    raw = t.view(torch.uint8)
    # Independent decode of one byte: low nibble first; sign, 2 exponent bits, 1 mantissa bit.
    def e2m1(n: int) -> float:
        sign, exp, man = -1.0 if n & 8 else 1.0, (n >> 1) & 3, n & 1
        return sign * (man * 0.5 if exp == 0 else 2.0 ** (exp - 1) * (1 + man * 0.5))
    b = int(raw[1, 3])
    assert values.shape == (3, 16)
    assert values[1, 6].item() == e2m1(b & 0xF) and values[1, 7].item() == e2m1(b >> 4)
    scales = default_tensor((4,), "float8_e8m0fnu", seed=1, device="cpu")
    assert bool(((scales.float() >= 2.0**-8) & (scales.float() <= 2.0**7)).all())


def test_fp4_problem_loads_and_validates(tmp_path):
    data = yaml.safe_load((TINY / "scaled_add" / "problem.yaml").read_text())
    data["inputs"]["y"] = {"shape": ["N", "D // 2"], "dtype": "float4_e2m1fn_x2"}
    p = problem_from_dict(data, TINY / "scaled_add" / "problem.yaml")
    assert p.auto_bytes({"N": 4, "D": 64}) == 4 * 64 * 4 + 4 * 32 + 4 * 64 * 4


def test_shipped_data_dependent_problems_declare_a_hook():
    hooked = [p for p in (load_problem(f) for f in sorted((ROOT / "problems").rglob("problem.yaml"))) if p.cost]
    assert len(hooked) >= 4
    for p in hooked:
        assert p.flops is None and p.bytes is None
        w = p.workloads[0]
        c = workload_cost(p, p.resolve_axes(w), p.scalars_for(w))
        assert 0 < c.bytes <= p.auto_bytes(p.resolve_axes(w))
