"""What the edge rounds add to a record's wall time on this machine: each problem's torch_eager at its
``test_axes`` (``--small``), edge rounds on; per record the rounds' seconds (``harness.edge_s``, the
worker calls, + ``harness.edge_prepare_s``, the parent's references) over the record's wall time.

    python benchmarks/edge_cost.py -o results/edge_cost_cpu.json [--device cuda] [--no-burst] [--only GLOB...]

``--no-burst`` leaves the parent-clocked burst out of the run (in this process only): on a shared,
overloaded CPU it can reject honest candidates as REWARD_HACK before the edge rounds run, and a
record that never reaches them measures nothing. Without the burst the wall time is smaller, so the
share is, if anything, overstated.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
from pathlib import Path

from solbench import api
from solbench.data.library import problems_root
from solbench.data.problem import find_problems, load_problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="results/edge_cost_cpu.json")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--no-burst", action="store_true")
    ap.add_argument("--budget", type=float, default=0.2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine")
    args = ap.parse_args()
    if args.no_burst:
        from solbench.engine import evaluation

        evaluation._burst = lambda *a, **k: None  # noqa: SLF001 - this measurement only (see the docstring)
    paths = [p for p in find_problems(problems_root(None))
             if not args.only or any(fnmatch.fnmatch(load_problem(p).name, g) for g in args.only)]
    rows = []
    for path in paths:
        eager = path.parent / "solutions" / "torch_eager.py"
        result = api.run_problems([path], [eager], device=args.device, small=True, budget_s=args.budget, seed=1,
                                  output=Path(args.output).with_suffix(".jsonl"), workers_ahead=0)
        for r in result.records:
            h = r.harness or {}
            edge = float(h.get("edge_s") or 0) + float(h.get("edge_prepare_s") or 0)
            wall = float(h.get("wall_s") or 0)
            edge_info = r.correctness.get("edge") or {}
            rows.append({"problem": r.problem, "status": r.status, "wall_s": round(wall, 3), "edge_s": round(edge, 3),
                         "share": round(edge / wall, 4) if wall else None,
                         "rounds_run": len(edge_info.get("run", [])), "rounds_skipped": len(edge_info.get("skipped", []))})
            print(rows[-1], flush=True)
    ran = [r for r in rows if r["edge_s"] and r["wall_s"]]
    shares = [r["share"] for r in ran]
    summary = {"device": args.device, "small": True, "budget_s": args.budget, "burst": not args.no_burst,
               "records": len(rows), "records_with_edge_rounds": len(ran),
               "share_of_wall": round(sum(r["edge_s"] for r in ran) / sum(r["wall_s"] for r in ran), 4) if ran else None,
               "median_share": round(statistics.median(shares), 4) if shares else None,
               "max_share": max(shares) if shares else None, "goal_share_max": 0.10, "rows": rows}
    Path(args.output).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
