"""Precision of the parent-clocked burst: how an honest candidate's claimed median compares with the
parent's own time per call, over problems and sizes.

Runs ``solbench run`` on a few problems (every workload) with their shipped honest solutions, and from
each record's ``correctness.burst`` takes, per burst: the claimed median, the parent's time per call
(wall, or on the CPU the worker's CPU time; the harness's own work taken off), their ratio, and on a
GPU NVML's device utilisation over the burst (the device-busy time per call, and the claim against
it). The least honest ratio is what ``solbench.engine.burst.MIN_RATIO`` must stay below; a forger
claiming k times less than its true time shows about 1/k of the honest ratio.

    python benchmarks/burst_precision.py --out results/h200/burst_precision.json
    python benchmarks/burst_precision.py --device cpu --problems llama3_1_8b.rmsnorm --workloads decode_b1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from solbench.data import read_records

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ["llama3_1_8b.rmsnorm", "llama3_1_8b.swiglu", "llama3_1_8b.rope", "llama3_1_8b.fused_add_rmsnorm",
            "llama3_1_8b.attn_o_proj_residual"]
SOLUTIONS = ("torch_eager.py", "triton_")  # names or prefixes of the honest solutions to run


def _folder(problem: str) -> Path:
    return ROOT / "problems" / Path(*problem.split("."))


def _solutions(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "solutions").glob("*.py") if p.name.startswith(SOLUTIONS))


def _run(problem: str, device: str, workloads: list[str], out: Path) -> float:
    folder = _folder(problem)
    cmd = [sys.executable, "-m", "solbench", "run", str(folder), "--device", device, "-o", str(out), "-q"]
    for w in workloads:
        cmd += ["--workload", w]
    for s in _solutions(folder):
        cmd += ["--solution", str(s)]
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.monotonic() - t0


def _bursts(record: dict[str, Any]) -> list[dict[str, Any]]:
    burst = (record.get("correctness") or {}).get("burst") or {}
    rows = []
    for i, a in enumerate(burst.get("attempts") or []):
        nvml = (a.get("outside") or {}).get("nvml") or {}
        busy = nvml.get("device_busy_s")
        per_call_device = busy / a["calls"] if busy else None
        rows.append({"attempt": i + 1, "calls": a["calls"], "claimed_s": burst["claimed_s"], "wall_s": a["wall_s"],
                     "rtt_s": a["rtt_s"], "overhead_s": a.get("overhead_s"), "per_call_s": a["per_call_s"],
                     "ratio": a["ratio"], "ok": a["ok"], "worker_cpu_s": (a.get("outside") or {}).get("worker_cpu_s"),
                     "device_util_mean": nvml.get("device_util_mean"), "device_util_samples": nvml.get("device_util_samples"),
                     "per_call_device_s": per_call_device,
                     "ratio_device": burst["claimed_s"] / per_call_device if per_call_device else None,
                     "context_pids": nvml.get("context_pids"), "pids_visible": nvml.get("pids_visible")})
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = sorted(r["ratio"] for r in rows)
    dev = sorted(r["ratio_device"] for r in rows if r["ratio_device"])
    out: dict[str, Any] = {"bursts": len(rows)}
    if ratios:
        out.update(min_ratio=ratios[0], median_ratio=statistics.median(ratios), max_ratio=ratios[-1],
                   p5_ratio=ratios[max(0, int(0.05 * len(ratios)) - 1)])
    if dev:
        out.update(min_ratio_device=dev[0], median_ratio_device=statistics.median(dev), max_ratio_device=dev[-1])
    return out


def _made_by(records: list[dict[str, Any]], paths: list[Path]) -> dict[str, Any]:
    """Where read records were made: their device and versions, not this machine's."""
    env = (records[0].get("environment") or {}) if records else {}
    return {"device": records[0].get("device") if records else None, "torch": env.get("torch"),
            "commit": env.get("solbench"), "when": records[0].get("timestamp") if records else None,
            "records_files": [p.name for p in paths]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="cuda (default where present) or cpu")
    parser.add_argument("--problems", nargs="*", default=PROBLEMS)
    parser.add_argument("--workloads", nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--records", type=Path, nargs="*", default=[],
                        help="read the bursts of these results files (e.g. a library sweep's) instead of running")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out_path = args.out or ROOT / "results" / f"burst_precision_{device}.json"
    records: list[dict[str, Any]] = []
    seconds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.records:
            found, warnings = read_records([path]) if path.is_file() else ([], [f"{path}: no such file"])
            if warnings or not found:
                sys.exit(f"burst_precision: {(warnings or [f'{path}: no records'])[0]}; give a results file (.jsonl)")
            records += found
        for problem in [] if args.records else args.problems:
            jsonl = Path(tmp) / f"{problem}.jsonl"
            seconds[problem] = _run(problem, device, args.workloads, jsonl)
            if jsonl.exists():
                records += [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    table = []
    for r in records:
        for b in _bursts(r):
            table.append({"problem": r["problem"], "workload": r["workload"], "solution": r["solution"],
                          "status": r["status"], "reason": r.get("reason"), **b})
    not_passed = [{k: r.get(k) for k in ("problem", "workload", "solution", "status", "reason")}
                  for r in records if r["status"] != "PASSED"]
    result = {"device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
              "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
              "torch": torch.__version__, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              **(_made_by(records, args.records) if args.records else {}),
              "records": len(records), "seconds_per_problem": seconds, "summary": _summary(table),
              "summary_first_attempt": _summary([t for t in table if t["attempt"] == 1]),
              "not_passed": not_passed, "bursts": table}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("device", "records", "summary", "summary_first_attempt")}, indent=1))
    for t in sorted(table, key=lambda t: t["ratio"])[:10]:
        print(f"{t['ratio']:.3f} {t['problem']} {t['workload']} {t['solution']} claimed {t['claimed_s'] * 1e6:.2f} us "
              f"per call {t['per_call_s'] * 1e6:.2f} us overhead {(t['overhead_s'] or 0) * 1e6:.2f} us "
              f"device {t['ratio_device']}")
    print(f"{len(not_passed)} record(s) not PASSED; written {os.path.relpath(out_path)}")


if __name__ == "__main__":
    main()
