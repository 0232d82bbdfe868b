"""solbench records -> FlashInfer-Trace traces (one JSON line each).

A trace names its definition (the problem), its solution (the candidate), the workload (its var
axes, inputs marked ``random``: solbench draws fresh seeded inputs every round) and an evaluation:
status (solbench's statuses, ``INCORRECT`` as ``INCORRECT_NUMERICAL``), correctness (the worst
round's max absolute and relative errors), performance (``latency_ms`` = solbench's median; no
reference latency: solbench scores against the roofline, so ``extra.sol`` carries the SOL and
T_ideal), environment and timestamp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from solbench.data.results import read_records

_STATUS = {"INCORRECT": "INCORRECT_NUMERICAL"}


def _errors(record: dict[str, Any]) -> dict[str, Any]:
    worst = {"max_absolute_error": 0.0, "max_relative_error": 0.0}
    for rnd in (record.get("correctness") or {}).get("rounds", []):
        for out in (rnd.get("outputs") or {}).values() if isinstance(rnd.get("outputs"), dict) else []:
            for key, ours in (("max_absolute_error", "max_abs_err"), ("max_relative_error", "max_rel_err")):
                if isinstance(out, dict) and isinstance(out.get(ours), (int, float)):
                    worst[key] = max(worst[key], float(out[ours]))
    return worst


def trace_of(record: dict[str, Any]) -> dict[str, Any]:
    env, status = record.get("environment") or {}, record.get("status")
    time_s = record.get("time_s") if status == "PASSED" else None
    return {
        "definition": record.get("problem"),
        "solution": record.get("solution"),
        "workload": {"uuid": record.get("workload"), "axes": dict(record.get("axes") or {}),
                     "inputs": {"*": {"type": "random"}}},
        "evaluation": {
            "status": _STATUS.get(status, status),
            "log": (record.get("reason") or "")[:5000],
            "correctness": {**_errors(record), "extra": {"solbench_status": status}},
            "performance": {"latency_ms": time_s * 1e3 if time_s else None, "reference_latency_ms": None,
                            "speedup_factor": None,
                            "extra": {"sol": record.get("sol"), "t_ideal_ms": (record.get("t_ideal_s") or 0) * 1e3,
                                      "gpu_spec": record.get("gpu_spec"), "bound": record.get("bound")}},
            "environment": {"hardware": env.get("gpu_name") or record.get("device"),
                            "libs": {k: env[k] for k in ("torch", "triton", "cuda") if env.get(k)}},
            "timestamp": record.get("timestamp"),
        },
    }


def export_traces(paths: list[Path], output: Path) -> int:
    """Write every record found under ``paths`` as a trace line to ``output``; return the count."""
    records, _warnings = read_records(paths)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(trace_of(r), default=str) + "\n")
    return len(records)
