"""solbench.engine.telemetry: reason-bit decoding, throttle flags, the summary, and the unavailable paths."""

from __future__ import annotations

import pytest

from solbench.engine import telemetry
from solbench.engine.telemetry import TelemetrySampler, decode_reasons, summarize, throttle_flags


def test_decode_reasons_names_each_bit():
    assert decode_reasons(0) == []
    assert decode_reasons(0x1) == ["gpu_idle"]
    assert decode_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0x1000) == ["unknown_0x1000"]
    every = sum(telemetry.REASON_BITS)
    assert len(decode_reasons(every)) == len(telemetry.REASON_BITS)


@pytest.mark.parametrize("mask, flags", [
    (0x0, []),
    (0x1, []),  # idle: not a slowdown of the measurement
    (0x2, []),
    (0x4, ["power_throttled"]),
    (0x80, ["power_throttled"]),
    (0x20, ["thermal_throttled"]),
    (0x40, ["thermal_throttled"]),
    (0x8, ["power_throttled", "thermal_throttled"]),  # HW slowdown: power brake or thermal
    (0x1 | 0x4 | 0x20, ["power_throttled", "thermal_throttled"]),
])
def test_throttle_flags(mask, flags):
    assert throttle_flags(mask) == flags


def test_summarize_min_max_energy_and_flags():
    samples = [{"sm_mhz": 1980.0, "mem_mhz": 3201.0, "temperature_c": 40.0, "power_w": 300.0},
               {"sm_mhz": 1470.0, "mem_mhz": 3201.0, "temperature_c": 55.0, "power_w": 695.0},
               {"sm_mhz": 1500.0}]
    out = summarize(samples, 0x4, energy0_mj=1_000, energy1_mj=701_000, duration_s=1.0, interval_s=0.05)
    assert out["available"] is True and out["samples"] == 3
    assert (out["sm_min_mhz"], out["sm_max_mhz"]) == (1470.0, 1980.0)
    assert (out["temperature_min_c"], out["temperature_max_c"]) == (40.0, 55.0)
    assert (out["power_min_w"], out["power_max_w"]) == (300.0, 695.0)
    assert out["energy_j"] == pytest.approx(700.0) and out["avg_power_w"] == pytest.approx(700.0)
    assert out["power_throttled"] is True and out["thermal_throttled"] is False
    assert out["clocks_event_reason_names"] == ["sw_power_cap"]


def test_summarize_without_energy_counter():
    out = summarize([], 0, None, None, 0.5, 0.05)
    assert "energy_j" not in out and out["sm_min_mhz"] is None


def test_cpu_device_is_unavailable():
    with TelemetrySampler("cpu") as t:
        pass
    res = t.result()
    assert set(res) == {"available", "reason"} and res["available"] is False
    assert "cpu" in res["reason"]


def test_missing_nvml_is_unavailable_not_an_error(monkeypatch):
    def no_nvml():
        raise ModuleNotFoundError("No module named 'pynvml'")

    monkeypatch.setattr(telemetry, "_nvml", no_nvml)
    with TelemetrySampler("cuda") as t:
        pass
    res = t.result()
    assert res["available"] is False and "pynvml" in res["reason"]


class _FakeNvml:
    """Stands in for pynvml: a clock that drops and a power-cap reason on the second sample."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    def __init__(self):
        self.calls = 0
        self.energy = 0

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return "h"

    def nvmlDeviceGetHandleByIndex(self, i):
        return "h"

    def nvmlDeviceGetClockInfo(self, h, kind):
        self.calls += 1
        return 1980 if self.calls < 3 else 1470

    def nvmlDeviceGetTemperature(self, h, kind):
        return 50

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 if self.calls >= 3 else 0x0

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy += 1000
        return self.energy


def test_sampler_ors_reasons_over_samples(monkeypatch):
    fake = _FakeNvml()
    monkeypatch.setattr(telemetry, "_nvml", lambda: fake)
    with TelemetrySampler("cuda", "GPU-x", interval_s=0.01) as t:
        import time

        time.sleep(0.1)
    res = t.result()
    assert res["available"] and res["samples"] >= 3
    assert res["sm_min_mhz"] == 1470 and res["sm_max_mhz"] == 1980
    assert res["power_throttled"] and res["clocks_event_reasons"] == 0x4
    assert res["energy_j"] == pytest.approx(1.0)
