"""How fast `solbench profile` gets through the library: seconds per (problem, candidate) under Nsight Compute.

Profiles the largest workload of ``--problems`` library problems (those shipping a candidate that
matches ``--only``, default ``torch_eager``; cheapest first, so a time box keeps the most), one
`solbench profile` run in this process, and rewrites the summary after every record, so a run cut
by ``--time-box`` (or by ``timeout``) still leaves it:

    {"pairs", "problems", "wall_s", "median_pair_s", "pair_s": [...], "profiled_ok", "statuses",
     "phases_median_s": {...}, "profile_median_s", "complete", "goal", ...}

A pair's time is the wall time from its start (the run's ``task`` call for it) to the next pair's
start, the last one's to its record: its inputs, the guarded run, the worker under ncu, the replays,
and whatever of its exit and export the next pair waited for. (A record is written once its export
is in, while the next pair runs, so the time between records would give each pair its successor's
time, the first pair two pairs and the run's start, the last one its export alone.) ``startup_s``:
from the run's start to the first pair's. ``phases_median_s`` are the medians of each profile's
``phases_s`` (worker start and load, warm-up call, the wait for it after the guarded run, profiled
call, report, export). Goal (issue 26): ``problems >= 20`` and ``median_pair_s <= 8``.

    python benchmarks/profile_throughput.py -o results/h200/profile_throughput.json --time-box 200
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from solbench.api import largest_workload, plan_run, profile_problems  # noqa: E402
from solbench.data.library import problems_root  # noqa: E402
from solbench.data.problem import find_problems  # noqa: E402
from solbench.data.record import ResultRecord  # noqa: E402

GOAL = {"problems_min": 20, "median_pair_s_max": 8.0}


class TimeBox(BaseException):
    """The time box ran out: the run stops after the record that crossed it (the summary is written)."""


class Tally:
    """The run's progress hook: one summary, rewritten after every record."""

    def __init__(self, out: Path, planned: int, time_box_s: float, argv: list[str]):
        self.out, self.planned, self.time_box_s = out, planned, time_box_s
        self.clock = time.monotonic  # the tests give it theirs
        self.t0 = self.last = self.clock()
        self.rows: list[dict[str, Any]] = []
        self.starts: list[tuple[tuple[str, str, str], float]] = []  # each pair's start, in the run's order
        out_dir = os.environ.get("OUT")
        shown = [a.replace(out_dir, "$OUT") if out_dir else a for a in argv]  # no host paths in the results
        self.doc: dict[str, Any] = {"command": " ".join(["python", "benchmarks/profile_throughput.py", *shown]),
                                    "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    "planned_pairs": planned, "complete": False}

    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.starts.append(((problem, workload, candidate), self.clock()))

    def pair_span(self, record: ResultRecord, now: float) -> float:
        """Seconds from the record's pair's start to the next pair's (or to now, for the last one so far);
        from the previous record, for a record whose start was not seen."""
        keys = [k for k, _ in self.starts]
        key = (record.problem, record.workload, record.solution)
        if key not in keys:
            return now - self.last
        i = len(keys) - 1 - keys[::-1].index(key)
        return (self.starts[i + 1][1] if i + 1 < len(self.starts) else now) - self.starts[i][1]

    def record(self, record: ResultRecord) -> None:
        now = self.clock()
        p = record.profile
        self.rows.append({"problem": record.problem, "workload": record.workload, "candidate": record.solution,
                          "status": record.status, "pair_s": round(self.pair_span(record, now), 3),
                          "profile": p.status if p is not None else None,
                          "profile_s": p.seconds if p is not None else None,
                          "phases_s": dict(p.phases_s) if p is not None else {},
                          "reason": (p.reason if p is not None and p.status != "ok" else record.reason)})
        self.last = now
        self.write()
        if self.time_box_s and now - self.t0 > self.time_box_s:
            raise TimeBox

    def write(self, complete: bool = False) -> None:
        ok = [r for r in self.rows if r["profile"] == "ok"]
        pair_s = [r["pair_s"] for r in self.rows]
        phases = sorted({k for r in ok for k in r["phases_s"]})
        self.doc.update(
            pairs=len(self.rows), profiled_ok=len(ok), problems=len({r["problem"] for r in ok}),
            wall_s=round(self.clock() - self.t0, 2),
            startup_s=round(self.starts[0][1] - self.t0, 2) if self.starts else None,
            median_pair_s=round(statistics.median(pair_s), 3) if pair_s else None, pair_s=pair_s,
            profile_median_s=round(statistics.median(r["profile_s"] for r in ok), 3) if ok else None,
            phases_median_s={k: round(statistics.median(r["phases_s"][k] for r in ok if k in r["phases_s"]), 3)
                             for k in phases},
            statuses=dict(Counter(f"{r['status']}/{r['profile']}" for r in self.rows)), complete=complete,
            goal=GOAL | {"met": bool(pair_s) and len({r["problem"] for r in ok}) >= GOAL["problems_min"]
                         and statistics.median(pair_s) <= GOAL["median_pair_s_max"]},
            rows=self.rows)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=str), encoding="utf-8")
        tmp.replace(self.out)


def select(count: int, only: list[str]) -> list[Any]:
    """The plan: library problems with a matching candidate, their largest workload, cheapest first."""
    plan = plan_run(find_problems(problems_root(None)))
    kept = []
    for item in plan:
        item.candidates = [c for c in item.candidates if any(fnmatch.fnmatchcase(c.name, p) for p in only)]
        item.workloads = largest_workload(item.problem, item.workloads)
        if item.candidates and item.workloads:
            kept.append(item)
    kept.sort(key=lambda i: i.problem.auto_bytes(i.problem.resolve_axes(i.workloads[0])))
    return kept[:count]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "results" / "profile_throughput.json")
    ap.add_argument("--problems", type=int, default=24, help="how many library problems (cheapest first)")
    ap.add_argument("--only", action="append", help="candidate name globs (default torch_eager)")
    ap.add_argument("--time-box", type=float, default=0.0, help="stop after the record that passes this many seconds")
    ap.add_argument("--budget", type=float, default=0.3, help="timing budget per workload, seconds")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    plan = select(args.problems, args.only or ["torch_eager"])
    tally = Tally(args.out, sum(len(i.candidates) for i in plan), args.time_box, argv)
    records = args.out.with_suffix(".jsonl")
    try:
        profile_problems([i.problem.folder for i in plan], None, device=args.device, budget_s=args.budget,
                         output=records, only=args.only or ["torch_eager"], progress=tally)
        tally.write(complete=True)
    except TimeBox:
        tally.doc["stopped"] = f"time box of {args.time_box:g} s"
        tally.write()
    d = tally.doc
    print(f"{d['pairs']} pairs ({d['profiled_ok']} profiled) of {d['problems']} problems in {d['wall_s']} s; "
          f"median {d['median_pair_s']} s a pair; phases {d['phases_median_s']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
