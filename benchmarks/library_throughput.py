"""How fast the harness gets through the whole problem library: records per minute and overhead per record.

Runs every problem of the library, all workloads, ``torch_eager`` plus one more candidate (the
first of ``--second``'s globs that a problem ships: a Triton kernel, else torch.compile), on
executors (``--gpus all`` by default on CUDA, ``--jobs N`` on the CPU, ``--cluster ray``), or
in-process (``--plain``). Records are appended to ``--records`` as they finish, and the summary is
rewritten after each one, so a run killed by its time box (``timeout 540 python ...``) leaves both:

    {"problems", "records", "wall_s", "records_per_min", "overhead_by_size": [{"bucket", "records",
     "median_s", "p90_s"}], "statuses", "complete", "goal": {...}, ...}

A record's overhead is its wall time in its executor (inputs, reference, worker calls, checks:
``harness.wall_s``) less the candidate's timed samples; ``edge`` is what the edge rounds took of it
(``--no-edge`` runs without them). The goal (issue 15): ``wall_s < 600`` with
``problems >= 40`` on one H200; overhead median <= 0.5 s up to 256 MiB and <= 2 s at 2 GiB.

    python benchmarks/library_throughput.py -o results/h200/library_throughput.json
    python benchmarks/library_throughput.py --device cpu --jobs 2 --only 'llama3_1_8b.rms*' --small-only
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from solbench.api import plan_run, resolve_options, run_plan
from solbench.data.library import problems_root
from solbench.data.problem import find_problems
from solbench.data.record import ResultRecord
from solbench.engine.runner import PlanItem

MIB = 1 << 20
BUCKETS = [(256 * MIB, "<=256MiB"), (1024 * MIB, "256MiB-1GiB"), (4096 * MIB, "1-4GiB"), (None, ">4GiB")]
GOAL = {"wall_s_max": 600.0, "problems_min": 40, "overhead_median_s": {"<=256MiB": 0.5, "1-4GiB": 2.0}}


def bucket(nbytes: int) -> str:
    return next(name for limit, name in BUCKETS if limit is None or nbytes <= limit)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def overhead_by_size(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for _, name in BUCKETS:
        values = [r["overhead_s"] for r in rows if r["bucket"] == name]
        if values:
            out.append({"bucket": name, "records": len(values), "median_s": round(statistics.median(values), 4),
                        "p90_s": round(percentile(values, 0.9), 4)})
    return out


def edge_share(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the edge rounds cost: their seconds (the worker calls and the parent's references, harness.edge_s +
    edge_prepare_s) over the records' wall time, in all and per record (the goal: at most 10%)."""
    shares = [r["edge_s"] / r["wall_s"] for r in rows if r.get("wall_s")]
    total = sum(r["wall_s"] for r in rows)
    return {"edge_s": round(sum(r.get("edge_s", 0.0) for r in rows), 3),
            "share_of_wall": round(sum(r.get("edge_s", 0.0) for r in rows) / total, 4) if total else None,
            "median_share": round(statistics.median(shares), 4) if shares else None,
            "p90_share": round(percentile(shares, 0.9), 4) if shares else None, "goal_share_max": 0.10}


class Tally:
    """Progress hooks: one row per record, and the summary rewritten to ``path`` after each."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path, self.meta, self.rows = path, meta, []
        self.t0 = time.perf_counter()
        self.started: dict[str, float] = {}
        self.statuses: Counter[str] = Counter()
        self.stamps: list[float] = []  # seconds from the start to each record

    def begin(self, total: int) -> None:
        self.meta["records_planned"] = total
        self.write(complete=False)

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.started[f"{problem}/{workload}/{candidate}"] = time.perf_counter()

    def record(self, record: ResultRecord) -> None:
        harness = (record.model_extra or {}).get("harness") or {}
        wall = harness.get("wall_s")
        if wall is None:  # the plain run: from this process's own clock
            wall = time.perf_counter() - self.started.get(f"{record.problem}/{record.workload}/{record.solution}",
                                                          self.t0)
        timed = float(sum(record.timing.get("samples_s") or []))
        edge = float(harness.get("edge_s") or 0.0) + float(harness.get("edge_prepare_s") or 0.0)
        self.rows.append({"problem": record.problem, "workload": record.workload, "candidate": record.solution,
                          "status": record.status, "bytes": record.bytes, "bucket": bucket(record.bytes),
                          "wall_s": round(wall, 4), "overhead_s": round(wall - timed, 4), "edge_s": round(edge, 4),
                          "device_index": record.device_index, "host": record.host})
        self.statuses[record.status] += 1
        self.stamps.append(time.perf_counter() - self.t0)
        self.write(complete=False)

    def write(self, complete: bool) -> dict[str, Any]:
        wall = time.perf_counter() - self.t0
        problems = len({r["problem"] for r in self.rows})
        summary = self.meta | {
            "complete": complete, "problems": problems, "records": len(self.rows), "wall_s": round(wall, 2),
            "records_per_min": round(len(self.rows) / wall * 60, 2) if wall else None,
            # Past the fixed start (executors, a Ray instance): what a comparison of two placements needs.
            "setup_s": round(self.stamps[0], 2) if self.stamps else None,
            "steady_records_per_min": (round((len(self.stamps) - 1) / (self.stamps[-1] - self.stamps[0]) * 60, 2)
                                       if len(self.stamps) > 2 else None),
            "statuses": dict(self.statuses), "overhead_by_size": overhead_by_size(self.rows),
            "edge": edge_share(self.rows),
            "goal": GOAL | {"met": complete and wall < GOAL["wall_s_max"] and problems >= GOAL["problems_min"]},
            "rows": self.rows,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(self.path)  # a kill mid-write leaves the previous summary whole
        return summary


def select(plan: list[PlanItem], second: list[str], only: list[str], smallest: bool) -> list[PlanItem]:
    """torch_eager plus the first candidate matching ``second`` (in that order) of each problem."""
    keep = []
    for item in plan:
        if only and not any(fnmatch.fnmatch(item.problem.name, g) for g in only):
            continue
        eager = [c for c in item.candidates if c.path.name == "torch_eager.py"]
        other = next((c for g in second for c in item.candidates if fnmatch.fnmatch(c.path.name, g)), None)
        item.candidates = eager + ([other] if other is not None else [])
        if smallest:
            item.workloads = [min(item.workloads, key=lambda w, p=item.problem: p.auto_bytes(p.resolve_axes(w)))]
        if item.candidates and item.workloads:
            keep.append(item)
    return keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="results/h200/library_throughput.json")
    ap.add_argument("--records", default=None, help="JSONL of the records (default: next to --output, dated)")
    ap.add_argument("--problems", default=None, help="problems folder (default: the library)")
    ap.add_argument("--only", nargs="*", default=[], help="problem-name globs")
    ap.add_argument("--second", nargs="*", default=["triton_*", "torch_compile*"],
                    help="globs for the second candidate, first match wins")
    ap.add_argument("--smallest-only", action="store_true", help="each problem's smallest workload (quick checks)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--gpus", default=None, help="default on CUDA: all")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--cluster", default=None, help="ray or ray://HOST:PORT")
    ap.add_argument("--plain", action="store_true", help="the in-process run (one device, no executors)")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--no-edge", action="store_true", help="without the edge rounds (to measure what they cost)")
    ap.add_argument("--small", action="store_true", help="each problem shrunk to its test_axes (quick CPU runs)")
    args = ap.parse_args()

    options = resolve_options(device=args.device, budget_s=args.budget, timeout_s=args.timeout,
                              edge_rounds=False if args.no_edge else None)
    cuda = options.device.startswith("cuda")
    if not args.plain:
        gpus = args.gpus or ("all" if cuda and not args.cluster else None)
        options = resolve_options(options, gpus=gpus, jobs=args.jobs, cluster=args.cluster)
    plan = select(plan_run(find_problems(problems_root(args.problems)), small=args.small), args.second, args.only,
                  args.smallest_only)
    out = Path(args.output)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    records = Path(args.records or out.with_name(f"{out.stem}_{stamp}.jsonl"))
    meta = {"device": options.device, "placement": {"gpus": options.gpus, "jobs": options.jobs,
                                                    "cluster": options.cluster, "plain": args.plain},
            "budget_s": options.budget_s, "problems_planned": len(plan), "records_file": records.as_posix(),
            "started": stamp}
    tally = Tally(out, meta)
    print(f"{len(plan)} problems, {sum(len(i.workloads) * len(i.candidates) for i in plan)} records planned", flush=True)
    result = run_plan(plan, options, records, tally)
    summary = tally.write(complete=True)
    summary["spec"] = result.spec_id
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
