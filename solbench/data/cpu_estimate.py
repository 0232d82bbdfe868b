"""The built-in upper-bound roofline of a CPU (spec id ``cpu_estimate``), and the CPU facts it rests on.

Every peak and the bandwidth are set above what a CPU core can reach (AVX-512 FMA / AMX rates at
5 GHz, L1 load bandwidth), so the physics floor never rejects an honest CPU run; SOL against it is
low by design. ``solbench calibrate`` (and ``solbench demo`` on a CPU) measure the real ceilings.
"""

from __future__ import annotations

import os
import platform
from typing import Any

CPU_ESTIMATE_ID = "cpu_estimate"
_CPU_CLOCK_HZ = 5.0e9
# FLOP per cycle per core, upper bounds: AVX-512 (2 FMA units x lanes x 2) and AMX tiles for 16-bit/int8.
_CPU_FLOP_PER_CYCLE = {"float64": 32, "float32": 64, "tf32": 64, "bfloat16": 2048, "float16": 2048,
                       "float8_e4m3fn": 2048, "float8_e5m2": 2048, "int8": 4096}
_CPU_BYTES_PER_CYCLE = 128  # two 64-byte L1 loads per cycle per core


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_estimate_fields() -> dict[str, Any]:
    """The fields of an upper-bound roofline spec for this CPU (see the module docstring);
    :func:`solbench.data.hardware.cpu_estimate_spec` makes the spec of them."""
    cores = cpu_count()
    note = (f"built-in upper-bound estimate for {cores} core(s) of {cpu_model()}: "
            f"cores x {_CPU_CLOCK_HZ / 1e9:g} GHz x "
            f"FLOP/cycle (AVX-512 FMA, AMX) and {_CPU_BYTES_PER_CYCLE} B/cycle (L1 loads); not a measurement - "
            "run `solbench calibrate` for a measured CPU spec")
    return {
        "id": CPU_ESTIMATE_ID,
        "name": f"CPU estimate ({cores} cores)",
        "vendor": "cpu",
        "device_type": "cpu",
        "memory_bandwidth": cores * _CPU_CLOCK_HZ * _CPU_BYTES_PER_CYCLE,
        "peak_flops": {k: cores * _CPU_CLOCK_HZ * v for k, v in _CPU_FLOP_PER_CYCLE.items()},
        "sources": [note],
        "notes": note,
    }
