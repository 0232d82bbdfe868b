"""The physics floor: no time below the measured ceilings (less the stated margin), no SOL above 1
against the datasheet; checked against T_ideal computed by hand from the spec files' numbers."""

from __future__ import annotations

import pytest
import yaml

from solbench.data.hardware import load_spec
from solbench.data.library import SHIPPED_SPECS
from solbench.data.record import Status
from solbench.data.roofline import point
from solbench.engine.scoring import MEASURED_MARGIN, Evaluation, floor_time, physics_floor

FLOPS, BYTES = 4 * 10**12, 10**9  # compute-bound on both specs below


@pytest.fixture
def specs(tmp_path, monkeypatch):
    """A datasheet GPU 'testgpu' (from the H200's file) and, optionally, its calibrated spec."""
    sheet = yaml.safe_load((SHIPPED_SPECS / "h200_sxm.yaml").read_text())
    sheet.update(id="testgpu", match=["Test GPU"])
    (tmp_path / "testgpu.yaml").write_text(yaml.safe_dump(sheet))
    monkeypatch.setenv("SOLBENCH_SPECS", str(tmp_path))

    def add_measured(scale: float) -> dict:
        m = yaml.safe_load((SHIPPED_SPECS / "measured" / "h200_sxm_measured.yaml").read_text())
        m.update(id="testgpu_measured", based_on="testgpu", match=[],
                 memory_bandwidth=sheet["memory_bandwidth"] * scale,
                 peak_flops={k: v * scale for k, v in sheet["peak_flops"].items()})
        (tmp_path / "measured").mkdir(exist_ok=True)
        (tmp_path / "measured" / "testgpu_measured.yaml").write_text(yaml.safe_dump(m))
        return m

    return sheet, add_measured


def _judge(t: float, spec) -> Evaluation:
    roof = point(FLOPS, BYTES, "bfloat16", spec)
    return physics_floor(Evaluation(Status.PASSED, timing={"median_s": t}), roof, spec)


def test_datasheet_alone_sol_above_one_is_never_passed(specs):
    sheet, _ = specs
    t_ideal = FLOPS / sheet["peak_flops"]["bfloat16"]  # by hand: compute-bound
    spec = load_spec("testgpu")
    assert _judge(0.99 * t_ideal, spec).status == Status.REWARD_HACK
    assert _judge(1.01 * t_ideal, spec).status == Status.PASSED


def test_measured_ceilings_raise_the_floor(specs):
    sheet, add_measured = specs
    add_measured(0.5)  # a calibrated GPU reaching half the datasheet
    t_ideal_measured = FLOPS / (0.5 * sheet["peak_flops"]["bfloat16"])
    floor = (1 - MEASURED_MARGIN) * t_ideal_measured
    spec = load_spec("testgpu")
    got, basis = floor_time(point(FLOPS, BYTES, "bfloat16", spec), spec)
    assert got == pytest.approx(floor) and "testgpu_measured" in basis
    slow_enough = _judge(1.01 * floor, spec)
    assert slow_enough.status == Status.PASSED
    too_fast = _judge(0.99 * floor, spec)  # SOL vs the datasheet only ~0.56, yet impossible here
    assert too_fast.status == Status.REWARD_HACK and "below_physics_floor" in too_fast.flags
    assert "testgpu_measured" in too_fast.reason


def test_a_generous_calibration_never_lowers_the_datasheet_floor(specs):
    sheet, add_measured = specs
    add_measured(2.0)  # a bogus measured spec above the datasheet
    spec = load_spec("testgpu")
    assert _judge(0.99 * FLOPS / sheet["peak_flops"]["bfloat16"], spec).status == Status.REWARD_HACK


@pytest.mark.parametrize("status", [Status.INCORRECT, Status.RUNTIME_ERROR])
def test_failed_results_are_left_alone(specs, status):
    spec = load_spec("testgpu")
    roof = point(FLOPS, BYTES, "bfloat16", spec)
    got = physics_floor(Evaluation(status, "why", timing={"median_s": 1e-12}), roof, spec)
    assert got.status == status and got.reason == "why"


def test_on_a_cpu_the_floor_is_the_estimate_never_the_calibrated_roof(tmp_path):
    """A CPU calibrated on a busy machine (bf16 roof 1.3 GFLOP/s): an honest eager op later beats it,
    and that is no hack; only a time below T_ideal on cpu_estimate, computed here by hand from this
    machine's cores, 5 GHz and the estimate's FLOP per cycle, is."""
    from solbench.data.cpu_estimate import _CPU_BYTES_PER_CYCLE, _CPU_CLOCK_HZ, _CPU_FLOP_PER_CYCLE, cpu_count

    data = {"id": "cpu_busy_host_20261201t000000", "name": "busy CPU", "kind": "measured", "vendor": "x86_64",
            "device_type": "cpu", "memory_bandwidth": 8.6e9, "peak_flops": {"bfloat16": 1.3e9, "float32": 1.3e9},
            "measured": {"method": "test", "timestamp": "2026-12-01T00:00:00+00:00", "device": "CPU"}}
    path = tmp_path / "any_name.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    flops, nbytes = 10**9, 10**6
    t_measured = point(flops, nbytes, "bfloat16", spec).t_ideal_s
    assert _cpu(0.5 * t_measured, spec, flops, nbytes).status == Status.PASSED  # SOL 2 against a busy roof
    hz = cpu_count() * _CPU_CLOCK_HZ
    t_estimate = max(flops / (hz * _CPU_FLOP_PER_CYCLE["bfloat16"]), nbytes / (hz * _CPU_BYTES_PER_CYCLE))
    too_fast = _cpu(0.99 * t_estimate, spec, flops, nbytes)
    assert too_fast.status == Status.REWARD_HACK and "cpu_estimate" in too_fast.reason
    assert _cpu(1.01 * t_estimate, spec, flops, nbytes).status == Status.PASSED


def _cpu(t: float, spec, flops: int, nbytes: int) -> Evaluation:
    roof = point(flops, nbytes, "bfloat16", spec)
    return physics_floor(Evaluation(Status.PASSED, timing={"median_s": t}), roof, spec)
