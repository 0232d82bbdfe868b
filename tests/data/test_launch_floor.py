"""The launch floor in spec files: a number or one per timing method, checked, and a documented default."""

from __future__ import annotations

import pytest

from solbench.data.hardware import DEFAULT_LAUNCH_FLOOR_S, load_spec, spec_from_dict
from solbench.errors import SpecError


def measured(**extra):
    return {"id": "x", "name": "x", "kind": "measured", "memory_bandwidth": 1e12, "peak_flops": {"float32": 1e13},
            "measured": {"method": "m", "timestamp": "t", "device": "d"}, **extra}


def test_number_or_per_method():
    assert spec_from_dict(measured(launch_floor_s=2e-6)).launch_floor_s == {"events": 2e-6, "graph": 2e-6}
    spec = spec_from_dict(measured(launch_floor_s={"events": 3e-6, "graph": 1.5e-6}))
    assert spec.launch_floor("graph") == (1.5e-6, "x: launch_floor_s.graph")


@pytest.mark.parametrize(("value", "words"), [({"warp": 1e-6}, "unknown timing method"), (2.0, "implausible")])
def test_bad_floor_is_named(value, words):
    with pytest.raises(SpecError, match=words):
        spec_from_dict(measured(launch_floor_s=value))


def test_datasheet_default_and_provenance():
    h200 = load_spec("h200_sxm")
    value, basis = h200.launch_floor("events")
    assert value == DEFAULT_LAUNCH_FLOOR_S["events"] and "default" in basis
    assert h200.launch_floor("cpu") is None and h200.launch_floor(None) is None
    data = h200.model_dump(mode="json")
    data["launch_floor_s"] = 1e-6
    with pytest.raises(SpecError, match="provenance.launch_floor_s"):
        spec_from_dict(data)
    data["provenance"]["launch_floor_s"] = "measured by solbench calibrate"
    assert spec_from_dict(data).launch_floor("graph")[0] == 1e-6


def test_cpu_calibration_measures_it():
    import torch

    from solbench.engine.calibrate import measure_launch_floor
    from solbench.timing import TimingConfig, time_calls

    floor = measure_launch_floor("cpu", quick=True, log=lambda _: None)["cpu"]
    assert 0 < floor["min_s"] <= floor["median_s"] < 1e-3
    # Independently: a call that does a million times more work reads longer through the same timer.
    big = torch.zeros(4_000_000)
    result, _ = time_calls(lambda i: (big.zero_(), None)[1], 1, TimingConfig(device="cpu", budget_s=0.2))
    assert result.median_s > floor["median_s"]
