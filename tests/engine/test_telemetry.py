"""solbench.engine.telemetry: reason-bit decoding, throttle flags, the summary, and the unavailable paths."""

from __future__ import annotations

import time

import pytest

from solbench.engine import telemetry
from solbench.engine.telemetry import TelemetrySampler, decode_reasons, summarize, throttle_flags
from solbench.timing import clockprobe
from solbench.timing.clockprobe import clocks_event_reasons, nvml_handle


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


def test_cpu_device_samples_the_machines_load():
    """On a CPU the sampler reads /proc: runnable tasks each interval, the CPU-time counters at both ends."""
    import os

    with TelemetrySampler("cpu", interval_s=0.01) as t:
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # this thread is runnable throughout
            pass
    res = t.result()
    assert res["available"] is True and res["kind"] == "cpu" and res["samples"] >= 2
    assert res["runnable_max"] >= 1 and 0.0 <= res["steal_share"] <= 1.0 and 0.0 < res["busy_share"] <= 1.0
    assert res["cpus"] == len(os.sched_getaffinity(0))


def test_cpu_load_summary_flags_a_busy_machine():
    quiet = telemetry.cpu_load_summary([0] * 8, [100, 0, 0, 900, 0, 0, 0, 0], [2, 3, 2], 2, 0.5)
    assert quiet["machine_busy"] is False and quiet["busy_share"] == pytest.approx(0.1)
    crowded = telemetry.cpu_load_summary([0] * 8, [1000, 0, 0, 0, 0, 0, 0, 0], [12, 15, 11], 2, 14.0)
    assert crowded["machine_busy"] is True and crowded["runnable_mean"] == pytest.approx(38 / 3)
    stolen = telemetry.cpu_load_summary([0] * 8, [800, 0, 0, 100, 0, 0, 0, 100], [2], 2, 1.0)
    assert stolen["machine_busy"] is True and stolen["steal_share"] == pytest.approx(0.1)


def test_a_noisy_cpu_time_says_the_machine_was_busy():
    from solbench.data.noise import noisy_reason

    timing = {"median_s": 1e-4, "p90_s": 3e-4, "ci95_rel": 0.02}
    busy = {"machine_busy": True, "runnable_mean": 12.5, "cpus": 2, "steal_share": 0.0}
    assert noisy_reason(timing, busy) == "noisy timing: p90 3.0x the median; the machine was busy (12.5 runnable tasks on 2 CPUs)"
    assert noisy_reason(timing, {"machine_busy": False}) == "noisy timing: p90 3.0x the median"
    assert noisy_reason({"median_s": 1e-4, "p90_s": 1.1e-4, "ci95_rel": 0.01}, busy) is None  # tight: not noisy


def test_missing_nvml_is_unavailable_not_an_error(monkeypatch):
    def no_nvml():
        raise ModuleNotFoundError("No module named 'pynvml'")

    monkeypatch.setattr(telemetry, "init_nvml", no_nvml)
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
    monkeypatch.setattr(telemetry, "init_nvml", lambda: fake)
    with TelemetrySampler("cuda", "GPU-x", interval_s=0.01) as t:
        import time

        time.sleep(0.1)
    res = t.result()
    assert res["available"] and res["samples"] >= 3
    assert res["sm_min_mhz"] == 1470 and res["sm_max_mhz"] == 1980
    assert res["power_throttled"] and res["clocks_event_reasons"] == 0x4
    assert res["energy_j"] == pytest.approx(1.0)


def test_stop_does_not_wait_for_a_sampler_stuck_in_nvml(monkeypatch):
    """A sample blocked in NVML when the workload ends is dropped; stop() returns at once and the
    blocked sample never lands in the result."""
    import threading

    fake, release, blocked = _FakeNvml(), threading.Event(), threading.Event()
    plain = fake.nvmlDeviceGetPowerUsage

    def stuck(h):
        if threading.current_thread().name == "solbench-telemetry":
            blocked.set()
            release.wait(10)
        return plain(h)

    fake.nvmlDeviceGetPowerUsage = stuck
    monkeypatch.setattr(telemetry, "init_nvml", lambda: fake)
    t = TelemetrySampler("cuda", "GPU-x", interval_s=0.01)
    t.start()
    assert blocked.wait(5)
    t.stop()
    n = t.result()["samples"]
    release.set()
    t_thread_done = threading.Event()
    threading.Timer(0.2, t_thread_done.set).start()
    t_thread_done.wait()
    res = t.result()
    assert res["samples"] == n == 1  # the start sample only: the stuck one is not appended late
    assert any("busy in NVML" in e for e in res["errors"])


# --- the NVML helpers the sampler, the environment and the clock probe share (timing.clockprobe) ---

class _Handles:
    """NVML's two lookups, by UUID (known UUIDs only) and by index, as distinguishable handles."""

    def __init__(self, known_uuid: str):
        self.known_uuid = known_uuid

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != self.known_uuid:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return f"uuid:{uuid}"

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"index:{i}"


def test_nvml_handle_by_uuid_then_index():
    nv = _Handles("GPU-a")
    assert nvml_handle(nv, "GPU-a", 3) == "uuid:GPU-a"
    assert nvml_handle(nv, "GPU-b", 3) == "index:3"  # CUDA and NVML disagree: the index is the fallback
    assert nvml_handle(nv, None, 1) == "index:1"


class _OldNvml(_FakeNvml):
    """A driver binding with only the deprecated throttle-reasons name."""

    nvmlDeviceGetCurrentClocksEventReasons = None

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x40

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000


def test_clocks_event_reasons_reads_either_name():
    assert clocks_event_reasons(_FakeNvml(), "h") == 0x0
    assert clocks_event_reasons(_OldNvml(), "h") == 0x40


def test_sampler_and_clock_probe_read_reasons_through_the_shared_helpers(monkeypatch):
    old = _OldNvml()
    monkeypatch.setattr(telemetry, "init_nvml", lambda: old)
    with TelemetrySampler("cuda", "GPU-x", interval_s=0.01) as t:
        pass
    res = t.result()
    assert res["clocks_event_reasons"] == 0x40 and res["thermal_throttled"] and not res["power_throttled"]
    monkeypatch.setattr(clockprobe, "init_nvml", lambda: old)
    state = clockprobe.nvml_state(0)
    assert state is not None and state["reasons"] == 0x40 and state["throttled"] == ["hw_thermal"]
    assert (state["power_w"], state["power_limit_w"]) == (650.0, 700.0)
