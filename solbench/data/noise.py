"""When a timing is too noisy to rank on: its 95% interval or its tail wide against the median.

A record keeps its PASSED status (the outputs were right), but a time whose 95% confidence interval
is more than ``NOISY_CI95_REL`` of the median, or whose p90 is more than ``NOISY_P90_RATIO`` times the
median, says more about the machine (another process, a clock change) than about the kernel: the run
table, the leaderboard data and the charts flag it, and the engine adds the ``noisy_timing`` flag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

NOISY_FLAG = "noisy_timing"
NOISY_CI95_REL = 0.10
NOISY_P90_RATIO = 1.5


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def machine_note(telemetry: Mapping[str, Any] | None) -> str | None:
    """What a CPU record's telemetry says about the machine while it was timed (``machine_busy``:
    more runnable tasks than twice its CPUs, or time stolen by the hypervisor), or None."""
    if not isinstance(telemetry, Mapping) or not telemetry.get("machine_busy"):
        return None
    runnable, cpus, steal = (_number(telemetry.get(k)) for k in ("runnable_mean", "cpus", "steal_share"))
    parts = [f"{runnable:.1f} runnable tasks on {cpus:.0f} CPUs" if runnable is not None and cpus else None,
             f"{steal:.0%} stolen" if steal else None]
    return "the machine was busy (" + ", ".join(p for p in parts if p) + ")" if any(parts) else "the machine was busy"


def noisy_reason(timing: Mapping[str, Any] | None, telemetry: Mapping[str, Any] | None = None) -> str | None:
    """Why a record's ``timing`` is too noisy to trust at face value, or None; with its ``telemetry``,
    what the machine was doing then (see :func:`machine_note`)."""
    if not isinstance(timing, Mapping):
        return None
    ci, median, p90 = (_number(timing.get(k)) for k in ("ci95_rel", "median_s", "p90_s"))
    reasons = []
    if ci is not None and ci > NOISY_CI95_REL:
        reasons.append(f"95% interval ±{ci:.0%} of the median")
    if median and p90 is not None and p90 > NOISY_P90_RATIO * median:
        reasons.append(f"p90 {p90 / median:.1f}x the median")
    machine = machine_note(telemetry) if reasons else None
    return "noisy timing: " + ", ".join(reasons) + (f"; {machine}" if machine else "") if reasons else None
