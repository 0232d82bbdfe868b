"""Roofline math, checked against the seed article's worked example and hand arithmetic."""

import math

import pytest

from solbench.data import roofline as rl
from solbench.data.hardware import spec_from_dict
from solbench.data.problem import problem_from_dict

# The seed article's machine: 1000 TFLOP/s fp16, 4 TB/s.
ARTICLE_SPEC = spec_from_dict({
    "id": "article_gpu", "name": "article GPU", "kind": "measured",
    "measured": {"method": "round numbers from the article", "timestamp": "2026-01-01", "device": "none"},
    "memory_bandwidth": 4e12, "peak_flops": {"float16": 1000e12},
})


def seed_problem(tmp_path):
    (tmp_path / "reference.py").write_text(
        "def run(attn, weight, residual):\n    return attn @ weight.t() + residual\n")
    return problem_from_dict({
        "name": "seed.o_proj_residual", "description": "article example",
        "source": {"model": "seed article"}, "axes": {
            "B": {"type": "var"}, "S": {"type": "var"}, "H": {"type": "const", "value": 2560}},
        "inputs": {"attn": {"shape": ["B", "S", "H"], "dtype": "float16"},
                   "weight": {"shape": ["H", "H"], "dtype": "float16"},
                   "residual": {"shape": ["B", "S", "H"], "dtype": "float16"}},
        "outputs": {"out": {"shape": ["B", "S", "H"], "dtype": "float16"}},
        "reference": "reference.py:run", "flops": "2 * B * S * H * H", "bytes": "auto",
        "compute_dtype": "float16", "tolerance": {"atol": 1e-2, "rtol": 1e-2},
        "workloads": [{"name": "prefill", "axes": {"B": 16, "S": 512}},
                      {"name": "decode", "axes": {"B": 1, "S": 1}}],
    }, tmp_path / "problem.yaml")


def test_seed_article_prefill_numbers(tmp_path):
    p = seed_problem(tmp_path)
    pt = rl.workload_point(p, "prefill", ARTICLE_SPEC)
    tokens, h = 16 * 512, 2560
    assert pt.flops == 2 * tokens * h * h == 107_374_182_400  # 1.07e11
    fused = (3 * tokens * h + h * h) * 2  # attn, residual, out + weight, fp16
    assert pt.bytes == fused == 138_936_320  # ~139 MB
    unfused = fused + 2 * tokens * h * 2  # the projection written then read back
    assert round(unfused / 1e6) == 223
    assert pt.arithmetic_intensity == pytest.approx(772.8, abs=0.1)  # ~770 FLOP/B
    assert pt.bound == "compute"
    assert pt.t_compute_s == pytest.approx(107_374_182_400 / 1e15)
    assert pt.t_ideal_s == pt.t_compute_s


def test_seed_article_decode_is_memory_bound(tmp_path):
    p = seed_problem(tmp_path)
    pt = rl.workload_point(p, "decode", ARTICLE_SPEC)
    assert pt.flops == 2 * 2560 * 2560
    assert pt.bytes == (3 * 2560 + 2560 * 2560) * 2
    assert pt.arithmetic_intensity == pytest.approx(1.0, abs=0.01)
    assert pt.bound == "memory"
    assert pt.t_ideal_s == pytest.approx(pt.bytes / 4e12)


def test_workload_point_takes_resolved_axes(tmp_path):
    """The engine passes the axes its cases were built with: the point is computed from those."""
    p = seed_problem(tmp_path)
    assert rl.workload_point(p, "prefill", ARTICLE_SPEC, p.resolve_axes(p.workload("prefill"))) == \
        rl.workload_point(p, "prefill", ARTICLE_SPEC)
    b, s, h = 2, 3, 8  # shrunk, as tests run it
    pt = rl.workload_point(p, "prefill", ARTICLE_SPEC, {"B": b, "S": s, "H": h})
    assert pt.workload == "prefill" and pt.flops == 2 * b * s * h * h
    assert pt.bytes == (3 * b * s * h + h * h) * 2
    assert pt.t_ideal_s == max(pt.flops / 1000e12, pt.bytes / 4e12)


def test_ridge_and_intensity():
    assert rl.ridge_point(989.4e12, 4.8e12) == pytest.approx(206.1, abs=0.1)
    assert rl.arithmetic_intensity(5, 0) == math.inf


def test_sol_and_bound_ties():
    assert rl.sol(1e-6, 2e-6) == 0.5
    with pytest.raises(ValueError):
        rl.sol(1e-6, 0)
    assert rl.bound(4, 1, 4, 1) == "compute"  # equal times: compute


def test_anchored_score():
    # At the roofline 1, at the baseline 0.5, 3x the gap -> 0.25.
    assert rl.anchored_score(1.0, 1.0, 3.0).score == 1.0
    assert rl.anchored_score(3.0, 1.0, 3.0).score == pytest.approx(0.5)
    assert rl.anchored_score(7.0, 1.0, 3.0).score == pytest.approx(0.25)
    fast = rl.anchored_score(0.5, 1.0, 3.0)
    assert fast.score == 1.0 and fast.below_ideal
    degenerate = rl.anchored_score(2.0, 1.0, 1.0)
    assert degenerate.baseline_not_slower and degenerate.score == 0.0
