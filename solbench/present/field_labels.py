"""Human names and units for the record's dotted keys (``environment.driver``, ``timing.details.flush_bytes``),
as the report's Environment and Timing sections show them; the raw key stays available (a hover title).

A key not listed here still reads well: its prefix becomes its group, its last part words, and a unit
suffix (``_s``, ``_mhz``, ``_w``, ``_c``, ``_j``, ``_bytes``, ``_hz``) a unit on its values.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from solbench.units import si

# key (without its group prefix) -> label
LABELS = {
    "gpu_name": "GPU", "gpu_uuid": "GPU UUID", "uuid": "GPU UUID", "gpu_index": "GPU index", "gpu_count": "GPUs in the machine",
    "driver": "NVIDIA driver", "cuda": "CUDA", "torch": "PyTorch", "triton": "Triton", "cupy": "CuPy",
    "python": "Python", "solbench": "solbench", "hostname": "host", "platform": "operating system",
    "compute_capability": "compute capability", "cpu_count": "CPU cores", "cpu_model": "CPU", "device_type": "device type",
    "l2_bytes": "L2 cache", "memory_bytes": "GPU memory", "mig_mode": "MIG mode", "persistence_mode": "persistence mode",
    "power_limit_w": "power limit", "sm_count": "SMs",
    "sm_max_mhz": "SM clock, highest", "sm_min_mhz": "SM clock, lowest", "mem_max_mhz": "memory clock, highest",
    "mem_min_mhz": "memory clock, lowest", "power_throttled": "power-throttled", "thermal_throttled": "thermally throttled",
    "clocks_event_reason_names": "clock slow-down reasons", "clocks_event_reasons": "clock slow-down reasons (bits)",
    "available": "recorded", "avg_power_w": "power, mean", "power_max_w": "power, highest", "power_min_w": "power, lowest",
    "duration_s": "duration sampled", "energy_j": "energy", "interval_s": "sampling interval", "samples": "samples",
    "temperature_max_c": "temperature, highest", "temperature_min_c": "temperature, lowest",
    "method": "method", "method_reason": "why this method", "ci95_rel": "95% interval of the median (relative)",
    "flush_bytes": "L2 flush size", "l2_flush_bytes": "L2 flush size", "n": "timed samples", "stop_reason": "stopped by",
    "warmup_calls": "warm-up calls", "overhead_subtracted_s": "timer overhead subtracted", "flags": "flags",
    "clock_ratio": "SM clock / highest clock", "cycles_median": "cycles, median",
    "low_clock_fraction": "samples at a low clock (share)", "low_clock_samples": "samples at a low clock",
    "max_sm_mhz": "SM clock, highest", "median_s_at_max_clock": "median time at the highest clock",
    "sm_mhz_effective": "SM clock, effective", "sm_mhz_max": "SM clock, highest seen", "sm_mhz_min": "SM clock, lowest seen",
    "chunks_mhz": "SM clock per chunk", "backend": "backend", "events_median_s": "CUDA events median",
    "kernels_per_sample": "kernels per sample", "rel_err": "CUDA events vs CUPTI (relative)",
    "span_median_s": "span, median", "timed_span_median_s": "timed span, median", "tail_median_s": "tail, median",
    "streams": "streams", "timer": "timer", "empty_window_s": "empty timed window", "graph_replays": "graph replays",
    "graph_calls_per_replay": "calls per graph replay", "graph_replay_median_s": "graph replay, median",
    "host_enqueue_median_s": "host enqueue, median", "launch_gap_exposed": "launch gaps exposed (share)",
    "spin_hz": "spin-kernel rate", "spin_s": "start spin", "events_estimate_s": "CUDA-events estimate",
    "clock_probe_backend": "clock probe", "graph_capture_rng": "graph capture of RNG",
    "persisting_l2_reset": "persisting-L2 reset",
}
# key prefix -> group heading
GROUPS = {"environment.packages.": "Python packages", "environment.": "Machine and software",
          "telemetry.": "Telemetry during the runs", "timing.clock.": "SM clock while timed",
          "timing.cupti.": "CUPTI trace", "timing.details.": "Timer details", "timing.": "Timing"}
# unit suffix -> (suffix shown, SI unit, scale)
UNITS = {"_mhz": ("MHz", None, 1.0), "_w": ("W", None, 1.0), "_c": ("°C", None, 1.0), "_j": ("J", None, 1.0),
         "_s": ("", "s", 1.0), "_bytes": ("", "B", 1.0), "_hz": ("", "Hz", 1.0)}
SHARES = ("_fraction", "_rel", "rel_err", "launch_gap_exposed")


def group_of(key: str) -> tuple[str, str]:
    """(group heading, key without the group prefix)."""
    for prefix, heading in GROUPS.items():
        if key.startswith(prefix):
            return heading, key.removeprefix(prefix)
    return "", key


def human_label(key: str) -> str:
    """A key's label: listed, or its words ('sm_clock_mhz.min' -> 'sm clock, min')."""
    _, rest = group_of(key)
    if rest in LABELS:
        return LABELS[rest]
    if key.startswith("environment.packages."):
        return rest
    words = [p.replace("_", " ") for p in rest.split(".")]
    for suffix in UNITS:
        words[0] = words[0].removesuffix(suffix.replace("_", " "))
    return ", ".join(w.strip() for w in words if w.strip())


def number_format(key: str) -> Callable[[float], str]:
    """How one number of this key reads: with its unit, as a share, or plain."""
    parts = key.split(".")
    name = next((p for p in reversed(parts) if any(p.endswith(s) for s in UNITS)), parts[-1])
    if any(name.endswith(s) or name == s for s in SHARES):
        return lambda x: f"{100 * x:.3g}%"
    if "_s_" in name:  # seconds in the middle: median_s_at_max_clock
        name = "_s"
    for suffix, (shown, unit, scale) in UNITS.items():
        if name.endswith(suffix):
            if unit:
                return lambda x, u=unit: "0" if x == 0 else si(x * scale, u, 3)
            return lambda x, s=shown: f"{x:.4g} {s}"
    return lambda x: f"{int(x)}" if math.isfinite(x) and float(x).is_integer() else f"{x:.4g}"
