"""The harness's own time per workload, beyond the candidate's timed calls.

Runs the engine on a few problems and, for every (candidate, workload), splits the wall time into
the candidate's timed samples (the sum of ``timing.samples_s``) and everything else: worker start
and candidate import, the correctness rounds, moving inputs and outputs, warm-up, re-checking the
timed outputs. Input generation and the reference (once per workload, shared by the candidates)
are reported separately. Prints a table and writes ``results/harness_overhead_<device>.json``,
with a projection for the goal: a 40-problem library, all workloads, two candidates, in under
10 minutes on one H200.

    python benchmarks/harness_overhead.py                    # cuda if present, else cpu
    python benchmarks/harness_overhead.py --device cpu --problems llama3_1_8b.rmsnorm
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from solbench.api import DEMO_PROBLEMS, plan_run, resolve_options, run_plan
from solbench.data.record import ResultRecord

GOAL_PROBLEMS, GOAL_CANDIDATES, GOAL_S = 40, 2, 600.0


class Clock:
    """Progress hooks that timestamp each (candidate, workload) and the gaps between them; after
    every record the JSON so far is rewritten (``complete: false``), so a run cut off by a time
    limit still leaves its pairs."""

    def __init__(self, out: Path, meta: dict, n_problems: int) -> None:
        self.out, self.meta, self.n_problems = out, meta, n_problems
        self.t_begin = 0.0
        self.last = 0.0
        self.rows: list[dict] = []
        self._start = 0.0
        self._gap = 0.0

    def begin(self, total: int) -> None:
        self.t_begin = self.last = time.perf_counter()

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self._start = time.perf_counter()
        self._gap = self._start - self.last  # input generation + reference when a workload starts

    def record(self, record: ResultRecord) -> None:
        now = time.perf_counter()
        timed = float(sum(record.timing.get("samples_s") or []))
        harness = record.harness or {}
        self.rows.append({
            "problem": record.problem, "workload": record.workload, "candidate": record.solution,
            "status": record.status, "wall_s": now - self._start, "timed_s": timed,
            "overhead_s": now - self._start - timed, "before_s": self._gap,
            "samples": record.timing.get("n"), "method": record.timing.get("method"), "harness": harness,
        })
        self.last = now
        self.meta["spec"] = record.gpu_spec
        self.write(now - self.t_begin, complete=False)

    def write(self, total_s: float, complete: bool) -> dict:
        summary = summarize(self.rows, total_s, self.meta["budget_s"], self.n_problems)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps({**self.meta, "complete": complete, "summary": summary, "pairs": self.rows},
                                       indent=2) + "\n")
        return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--problems", nargs="*", default=None, help="problem names or paths (default: the demo's)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="shipped candidates per problem, torch_eager first (default: 2 on CUDA, 1 on the CPU, "
                             "where torch.compile spends minutes compiling)")
    parser.add_argument("--budget", type=float, default=None, help="timing budget per workload (default 1 s; CPU 0.2 s)")
    parser.add_argument("--all-workloads", action="store_true", help="on the CPU too (default: smallest only)")
    parser.add_argument("--events-only", action="store_true",
                        help="CUDA: time with events on the timed stream only (the all-stream CUPTI timer off), "
                             "to measure what the all-stream timer costs")
    parser.add_argument("-o", "--output", default=None, help="JSON path (default results/harness_overhead_<device>.json)")
    args = parser.parse_args()

    options = resolve_options(device=args.device)
    cpu = not options.device.startswith("cuda")
    options = resolve_options(options, budget_s=args.budget or (0.2 if cpu else None),  # None: the run's default
                              all_streams=not args.events_only)
    device, budget = options.device, options.budget_s
    names = args.problems or list(DEMO_PROBLEMS[:3])
    plan = plan_run(names, smallest_workload=cpu and not args.all_workloads)
    for item in plan:
        eager_first = sorted(item.candidates, key=lambda c: (c.name != "torch_eager", c.name))
        item.candidates = eager_first[: args.candidates or (1 if cpu else GOAL_CANDIDATES)]
    out = Path(args.output or f"results/harness_overhead_{'cpu' if cpu else 'cuda'}.json")
    meta = {"device": device, "spec": None, "budget_s": budget, "all_streams": options.all_streams}
    clock = Clock(out, meta, len(plan))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_plan(plan, options, Path(tmp) / "records.jsonl", clock)
        summary = clock.write(time.perf_counter() - t0, complete=True)
    show(clock.rows, summary, device)
    print(f"written {out}")


def summarize(rows: list[dict], total_s: float, budget_s: float, n_problems: int) -> dict:
    overhead = [r["overhead_s"] for r in rows]
    workloads = {(r["problem"], r["workload"]) for r in rows}
    # The first candidate of each workload waits for the inputs and the reference.
    prep = [r["before_s"] for r in rows if r["before_s"] > 0.05]
    pair_wall = statistics.mean(r["wall_s"] for r in rows) if rows else 0.0
    wl_per_problem = len(workloads) / n_problems if n_problems else 0.0
    # Every (candidate, workload) at this run's average all-in cost (worker starts, inputs and
    # references included), times the goal's number of pairs.
    projected = GOAL_PROBLEMS * wl_per_problem * GOAL_CANDIDATES * (total_s / len(rows) if rows else 0.0)
    return {
        "pairs": len(rows), "workloads": len(workloads), "total_s": total_s,
        "overhead_median_s": statistics.median(overhead) if overhead else None,
        "overhead_mean_s": statistics.mean(overhead) if overhead else None,
        "timed_mean_s": statistics.mean(r["timed_s"] for r in rows) if rows else None,
        "pair_wall_mean_s": pair_wall,
        "prep_mean_s": statistics.mean(prep) if prep else 0.0,
        "projection": {"problems": GOAL_PROBLEMS, "workloads_per_problem": wl_per_problem,
                       "candidates": GOAL_CANDIDATES, "budget_s": budget_s, "projected_s": projected,
                       "goal_s": GOAL_S, "meets_goal": projected <= GOAL_S},
    }


def show(rows: list[dict], summary: dict, device: str) -> None:
    table = Table(title=f"harness overhead on {device} (seconds)")
    cols = {"start": "worker_start_s", "load": "load_s", "1st call": "first_call_s", "rounds": "rounds_s",
            "timing": "timing_request_s", "recheck": "recheck_s"}
    for col in ("problem / workload / candidate", "wall", "timed", "overhead", "inputs+ref", *cols):
        table.add_column(col, justify="left" if col.startswith("problem") else "right")
    for r in rows:
        h = r["harness"]
        table.add_row(f"{r['problem']} {r['workload']} {r['candidate']} {r['status']}", f"{r['wall_s']:.2f}",
                      f"{r['timed_s']:.3f}", f"{r['overhead_s']:.2f}", f"{r['before_s']:.2f}",
                      *[f"{h[k]:.2f}" if k in h else "-" for k in cols.values()])
    console = Console()
    console.print(table)
    p = summary["projection"]
    console.print(f"overhead per (candidate, workload): median {summary['overhead_median_s'] or 0:.2f} s, mean "
                  f"{summary['overhead_mean_s'] or 0:.2f} s; inputs + reference per workload {summary['prep_mean_s']:.2f} s")
    console.print(f"projection: {p['problems']} problems x {p['workloads_per_problem']:.1f} workloads x {p['candidates']} "
                  f"candidates at this rate = {p['projected_s'] / 60:.1f} min (goal {p['goal_s'] / 60:.0f} min)")


if __name__ == "__main__":
    main()
