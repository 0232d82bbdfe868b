"""Run the whole problem library with a subset of each problem's shipped candidates.

    python scripts/run_library.py -o results/h200/library.jsonl --include 'torch_eager*' 'triton_*'

`solbench run problems` runs every shipped candidate; this picks candidates by file-name glob
(e.g. leave torch_compile out of a time-boxed GPU run: it compiles once per shape) and prints a
one-line summary per problem as it goes.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from collections import Counter
from pathlib import Path

from solbench.api import plan_run, resolve_options, run_plan
from solbench.data.problem import find_problems
from solbench.data.results import read_records
from solbench.errors import SolbenchError


class LineProgress:
    def begin(self, total: int) -> None:
        self.total, self.done, self.t0 = total, 0, time.perf_counter()

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.done += 1  # started: with lanes in flight, several at once and out of plan order
        print(f"[{self.done}/{self.total} {time.perf_counter() - self.t0:6.0f}s] {problem} {workload} {candidate}",
              flush=True)

    def __getattr__(self, name: str):  # any other hook of the Progress protocol: ignore
        return lambda *a, **k: None


def drop_done(item, done: set[tuple[str, str, str, str]]) -> None:
    """Leave in ``item`` only the workloads and candidates with a (workload, candidate) pair not in ``done``:
    (problem, workload, candidate, the candidate file's sha256) of a PASSED record."""
    name = item.problem.name
    item.workloads = [w for w in item.workloads
                      if any((name, w.name, c.name, c.sha256) not in done for c in item.candidates)]
    item.candidates = [c for c in item.candidates
                       if any((name, w.name, c.name, c.sha256) not in done for w in item.workloads)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="problems")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--include", nargs="+", default=["*"], help="candidate file-name globs to run")
    ap.add_argument("--exclude", nargs="*", default=[], help="candidate file-name globs to skip")
    ap.add_argument("--only", nargs="*", default=[], help="problem-name globs to run")
    ap.add_argument("--first", nargs="*", default=[], help="problem-name globs to run before the rest")
    ap.add_argument("--extremes", action="store_true",
                    help="only each problem's smallest and largest workload (by bytes): a time-boxed sweep")
    ap.add_argument("--largest", action="store_true", help="only each problem's largest workload (by bytes)")
    ap.add_argument("--smallest", action="store_true", help="only each problem's smallest workload (by bytes)")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per workload (default: solbench run's)")
    ap.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when available)")
    ap.add_argument("--in-flight", type=int, default=0,
                    help="(problem, candidate) lanes at once; only timing windows are exclusive (0: by core count)")
    ap.add_argument("--resume", action="store_true",
                    help="skip the (problem, workload, candidate) triples the output file already has a PASSED "
                         "record of, made with the file as shipped now (the others run again: the code "
                         "may have changed since)")
    args = ap.parse_args()

    done: set[tuple[str, str, str, str]] = set()
    if args.resume and Path(args.output).exists():
        records, _ = read_records([args.output])  # a torn last line is skipped: that triple runs again
        # A PASSED record of another version of the file does not count: the shipped one runs again.
        done = {(r["problem"], r.get("workload"), r.get("solution"), r.get("solution_sha256"))
                for r in records if r.get("status") == "PASSED"}
    files = find_problems(args.problems)
    plan = plan_run(files)
    keep = []
    for item in plan:
        if args.only and not any(fnmatch.fnmatch(item.problem.name, g) for g in args.only):
            continue
        item.candidates = [c for c in item.candidates
                           if any(fnmatch.fnmatch(c.path.name, g) for g in args.include)
                           and not any(fnmatch.fnmatch(c.path.name, g) for g in args.exclude)]
        if args.extremes and len(item.workloads) > 2:
            by_size = sorted(item.workloads, key=lambda w: item.problem.auto_bytes(item.problem.resolve_axes(w)))
            item.workloads = [by_size[0], by_size[-1]]
        if args.largest or args.smallest:
            pick = max if args.largest else min
            item.workloads = [pick(item.workloads, key=lambda w: item.problem.auto_bytes(item.problem.resolve_axes(w)))]
        if done:
            drop_done(item, done)
        if item.candidates and item.workloads:
            keep.append(item)
    keep.sort(key=lambda i: not any(fnmatch.fnmatch(i.problem.name, g) for g in args.first))
    n = sum(len(i.workloads) * len(i.candidates) for i in keep)
    print(f"{len(keep)} problems, {n} (workload, candidate) pairs", flush=True)
    options = resolve_options(device=args.device, budget_s=args.budget, timeout_s=args.timeout, in_flight=args.in_flight)
    try:
        result = run_plan(keep, options, Path(args.output), LineProgress())
    except SolbenchError as err:  # one line; the records finished so far are in the output file
        print(f"error: {err}", file=sys.stderr)
        return 1
    counts = Counter(r.status for r in result.records)
    print("statuses:", dict(counts), "->", args.output, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
