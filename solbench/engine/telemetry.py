"""Telemetry around a workload's timing, sampled from the parent in a background thread: NVML on a GPU,
the machine's load on a CPU (:class:`CpuLoad`).

Recorded: SM and memory clocks (min/max), the clocks-event reasons OR-ed over every sample,
temperature and power (min/max), and the energy used (the difference of
``nvmlDeviceGetTotalEnergyConsumption``). A result measured while a power or thermal reason was
active carries ``power_throttled`` / ``thermal_throttled``. Where NVML is absent (no driver, no
nvidia-ml-py) the result is ``{"available": false, "reason": ...}``.

On a CPU: ``/proc/stat``'s runnable tasks (``procs_running``) each interval, and its CPU-time counters
at start and stop (the share of time stolen by the hypervisor, the share busy), and the 1-minute load
average. More runnable tasks than twice the CPUs, or more than 5% stolen, is ``machine_busy``: a
time measured then says more about the machine than about the kernel.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from solbench.settings import TELEMETRY_JOIN_S
from solbench.timing import clocks_event_reasons, init_nvml, nvml_handle

# NVML clocks-event reason bits (nvml.h, nvmlClocksEventReason*).
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
POWER_BITS = 0x4 | 0x8 | 0x80  # power cap, hardware slowdown (power or thermal), power brake
THERMAL_BITS = 0x8 | 0x20 | 0x40  # hardware slowdown, software / hardware thermal slowdown


def decode_reasons(mask: int) -> list[str]:
    """Names of the set reason bits; unknown bits as hex."""
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(REASON_BITS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def throttle_flags(mask: int) -> list[str]:
    """'power_throttled' / 'thermal_throttled' for the reasons that slow a measurement down."""
    flags = []
    if mask & POWER_BITS:
        flags.append("power_throttled")
    if mask & THERMAL_BITS:
        flags.append("thermal_throttled")
    return flags


BUSY_RUNNABLE_PER_CPU = 2.0  # runnable tasks per CPU above which the machine is busy (the worker's own
# threads and this sampler are a few: more than twice the CPUs is other work competing for them)
BUSY_STEAL = 0.05  # a virtual machine's CPUs taken by the hypervisor for others


def _proc_stat() -> tuple[list[int], int] | None:
    """The aggregate CPU-time counters of /proc/stat and its procs_running; None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    counters = next(([int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("cpu ")), [])
    running = next((int(ln.split()[1]) for ln in lines if ln.startswith("procs_running ")), 0)
    return counters, running


def _loadavg() -> float | None:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_load_summary(start: list[int], stop: list[int], running: list[int], cpus: int,
                     loadavg: float | None) -> dict[str, Any]:
    """The CPU telemetry record from /proc/stat's counters at start and stop (user nice system idle
    iowait irq softirq steal ...) and the runnable-task samples (pure; unit-tested)."""
    delta = [b - a for a, b in zip(start, stop, strict=False)]
    total = sum(delta[:8]) or 1
    idle = sum(delta[3:5])
    steal = delta[7] if len(delta) > 7 else 0
    mean = sum(running) / len(running) if running else None
    busy = (mean is not None and mean > BUSY_RUNNABLE_PER_CPU * cpus) or steal / total > BUSY_STEAL
    return {"available": True, "kind": "cpu", "cpus": cpus, "samples": len(running),
            "runnable_mean": mean, "runnable_max": max(running, default=None), "loadavg_1m": loadavg,
            "busy_share": 1 - idle / total, "steal_share": steal / total, "machine_busy": bool(busy)}


class CpuLoad:
    """The machine's load while a CPU workload is timed (see the module docstring)."""

    def __init__(self, interval_s: float) -> None:
        from solbench.data import cpu_count

        self.interval_s = interval_s
        self.cpus = cpu_count()
        self._running: list[int] = []
        self._start: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        first = _proc_stat()
        if first is None:
            return False
        self._start, running = first
        self._running.append(running)
        self._thread = threading.Thread(target=self._loop, name="solbench-cpu-load", daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = _proc_stat()
            if now is not None:
                self._running.append(now[1])

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=TELEMETRY_JOIN_S)
        last = _proc_stat()
        stop = last[0] if last else self._start
        return cpu_load_summary(self._start, stop, self._running, self.cpus, _loadavg())


def unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


class TelemetrySampler:
    """``with TelemetrySampler("cuda", uuid) as t: ...`` then ``t.result()``; polls every ``interval_s``."""

    def __init__(self, device: str, uuid: str | None = None, index: int = 0, interval_s: float = 0.05):
        self.device = device
        self.uuid = uuid
        self.index = index
        self.interval_s = interval_s
        self._samples: list[dict[str, float]] = []
        self._reasons = 0
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu: CpuLoad | None = None
        self._status: dict[str, Any] | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self._energy0: int | None = None
        self._energy1: int | None = None
        self._t0 = 0.0
        self._t1 = 0.0

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if not self.device.startswith("cuda"):
            self._cpu = CpuLoad(self.interval_s)
            if not self._cpu.start():
                self._cpu = None
                self._status = unavailable(f"device is {self.device}: no /proc/stat to read its load from")
            return
        try:
            self._nvml = init_nvml()
            self._handle = nvml_handle(self._nvml, self.uuid, self.index)
        except Exception as err:  # noqa: BLE001 - no NVML here: say why, carry on
            self._status = unavailable(f"NVML unavailable: {type(err).__name__}: {err}")
            return
        self._energy0 = self._energy()
        self._t0 = time.monotonic()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="solbench-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling without waiting out a slow NVML call: on the H200 the sampler thread was
        seen in one for ~2.3 s per record. A sample still in flight is dropped (and said so in ``errors``)."""
        if self._cpu is not None:
            self._status, self._cpu = self._cpu.stop(), None
            return
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=max(0.1, 2 * self.interval_s))
        if self._thread.is_alive():
            self._errors.append("sampler busy in NVML at stop: its last sample dropped")
        else:
            self._sample()
            self._energy1 = self._energy()
        self._t1 = time.monotonic()
        self._thread = None

    def _energy(self) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # noqa: BLE001 - not supported before Volta
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            sample = self._read()
            if not self._stop.is_set():  # a sample that outlived stop() is dropped, not appended late
                self._samples.append(sample)

    def _sample(self) -> None:
        self._samples.append(self._read())

    def _read(self) -> dict[str, float]:
        nv, h = self._nvml, self._handle
        s: dict[str, float] = {}
        for key, fn in (
            ("sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            ("mem_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            ("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
        ):
            try:
                s[key] = float(fn())
            except Exception as err:  # noqa: BLE001 - one missing counter does not stop the rest
                if len(self._errors) < 5:
                    self._errors.append(f"{key}: {type(err).__name__}")
        try:
            self._reasons |= clocks_event_reasons(nv, h)
        except Exception as err:  # noqa: BLE001
            if len(self._errors) < 5:
                self._errors.append(f"clocks_event_reasons: {type(err).__name__}")
        return s

    def result(self) -> dict[str, Any]:
        """The summary of what was sampled (or why nothing was)."""
        if self._status is not None:
            return dict(self._status)
        return summarize(self._samples, self._reasons, self._energy0, self._energy1,
                         self._t1 - self._t0, self.interval_s, self._errors)


def summarize(samples: list[dict[str, float]], reasons: int, energy0_mj: int | None, energy1_mj: int | None,
              duration_s: float, interval_s: float, errors: list[str] | None = None) -> dict[str, Any]:
    """The telemetry record from raw samples (pure; unit-tested without a GPU)."""
    out: dict[str, Any] = {"available": True, "samples": len(samples), "interval_s": interval_s,
                           "duration_s": duration_s}
    for key in ("sm_mhz", "mem_mhz", "temperature_c", "power_w"):
        vals = [s[key] for s in samples if key in s]
        base = key.rsplit("_", 1)
        out[f"{base[0]}_min_{base[1]}"] = min(vals) if vals else None
        out[f"{base[0]}_max_{base[1]}"] = max(vals) if vals else None
    out["clocks_event_reasons"] = reasons
    out["clocks_event_reason_names"] = decode_reasons(reasons)
    flags = throttle_flags(reasons)
    out["power_throttled"] = "power_throttled" in flags
    out["thermal_throttled"] = "thermal_throttled" in flags
    if energy0_mj is not None and energy1_mj is not None:
        out["energy_j"] = (energy1_mj - energy0_mj) / 1000.0
        out["avg_power_w"] = out["energy_j"] / duration_s if duration_s > 0 else None
    if errors:
        out["errors"] = list(errors)
    return out
