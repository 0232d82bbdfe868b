"""validate --deep: analytic FLOPs are cross-checked against FlopCounterMode on meta tensors."""

import shutil
from pathlib import Path

import yaml

from solbench.data.problem import load_problem
from solbench.data.validate import validate_paths
from solbench.engine.work import deep_check, workload_work

SEED = Path(__file__).resolve().parents[2] / "problems" / "llama3_1_8b" / "attn_o_proj_residual"


def copy_seed(tmp_path: Path, **changes) -> Path:
    dst = tmp_path / "seed"
    shutil.copytree(SEED, dst)
    data = yaml.safe_load((dst / "problem.yaml").read_text())
    data.update(changes)
    (dst / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return dst


def test_correct_formula_passes_deep_check():
    assert deep_check(load_problem(SEED)) == []


def test_wrong_formula_is_reported(tmp_path):
    dst = copy_seed(tmp_path, flops="T * H * H")  # forgot the 2 of a multiply-add
    errs = deep_check(load_problem(dst))
    assert errs and all("ratio 2.000" in e for e in errs)
    n, errors = validate_paths([dst], check=deep_check)
    assert n == 1 and errors


def test_flops_auto_counts_the_reference(tmp_path):
    p = load_problem(copy_seed(tmp_path, flops="auto"))
    axes = p.resolve_axes(p.workload("prefill_b4_s2048"))
    assert workload_work(p, axes)[0] == 2 * 8192 * 4096 * 4096  # on meta tensors: nothing is computed


def test_an_absurd_formula_on_an_elementwise_op_is_reported(tmp_path):
    """FlopCounterMode counts nothing in an elementwise reference, so the ratio check cannot see a typo
    there; a formula far above what elementwise work can do per byte moved is one."""
    src = SEED.parent / "swiglu"
    dst = tmp_path / "swiglu"
    shutil.copytree(src, dst)
    data = yaml.safe_load((dst / "problem.yaml").read_text())
    assert deep_check(load_problem(src)) == []  # the shipped formula passes
    data.update(flops="1000 * T * F * F", bytes="3 * T")
    (dst / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    errs = deep_check(load_problem(dst))
    assert errs and all("FlopCounterMode counts no matmul" in e and "check the formula" in e for e in errs)
    assert len(errs) == len(data["workloads"])  # one line per workload, each named
