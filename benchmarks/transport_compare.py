"""The same problems by each transport, back to back: what the device route saves per record.

Runs the shipped ``torch_eager`` candidate of a few problems (smallest and largest workload each,
up to 1 GiB) once with ``--transport memfd`` (inputs and outputs through the host) and once with
``--transport device`` (a GPU pool shared with the worker, docs/engine.md), and writes per record
the harness's own timings (``harness`` of the record: rounds, timing request, re-check, worker
wait, the route taken) and the wall time beyond the timed samples, with medians per route. The JSON
is rewritten after each route, so a time-boxed run keeps what finished.

    python benchmarks/transport_compare.py -o results/h200/transport_<date>.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness_overhead import Clock

from solbench.api import plan_run, resolve_options, run_plan

PROBLEMS = ("llama3_1_8b.rmsnorm", "llama3_1_8b.attn_o_proj_residual", "deepseek_v3.mla_decode")
ROUTES = ("memfd", "device")
PHASES = ("rounds_s", "timing_request_s", "recheck_s", "worker_wait_s")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(rows: list[dict], total_s: float) -> dict:
    """Medians per record of the wall time beyond the timed samples and of each harness phase."""
    out = {"records": len(rows), "total_s": total_s,
           "passed": sum(r["status"] == "PASSED" for r in rows),
           "transports": sorted({str(r["harness"].get("transport")) for r in rows}),
           "overhead_median_s": _median([r["overhead_s"] for r in rows])}
    for phase in PHASES:
        out[f"{phase.removesuffix('_s')}_median_s"] = _median([r["harness"][phase] for r in rows if phase in r["harness"]])
    return out


def run_route(route: str, names: list[str], budget: float, max_bytes: int) -> tuple[list[dict], float]:
    options = resolve_options(device="cuda", budget_s=budget, transport=route)
    plan = plan_run(names)
    for item in plan:
        item.candidates = [c for c in item.candidates if c.name == "torch_eager"]
        size = {w.name: item.problem.auto_bytes(item.problem.resolve_axes(w)) for w in item.workloads}
        by_size = sorted(item.workloads, key=lambda w: size[w.name])
        fits = [w for w in by_size if size[w.name] <= max_bytes] or by_size[:1]
        # the smallest, the largest within max_bytes (once if they are the same)
        item.workloads = [by_size[0]] + ([fits[-1]] if fits[-1].name != by_size[0].name else [])
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_plan(plan, options, Path(tmp) / "records.jsonl", clock)
        return clock.rows, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--budget", type=float, default=0.3, help="timing budget per workload, seconds")
    parser.add_argument("--max-bytes", type=float, default=1 << 30,
                        help="largest workload run per problem (its inputs and outputs, bytes): keeps the step short")
    parser.add_argument("-o", "--output", default="results/transport_compare.json")
    args = parser.parse_args()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {"problems": args.problems, "budget_s": args.budget, "routes": {}}
    for route in ROUTES:
        rows, total = run_route(route, args.problems, args.budget, int(args.max_bytes))
        report["routes"][route] = {"summary": summarize(rows, total), "records": rows}
        out.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(route, json.dumps(report["routes"][route]["summary"]))
    print(f"written {out}")


if __name__ == "__main__":
    main()
