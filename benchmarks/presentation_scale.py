"""How the presentation layer scales: 10k synthetic result records -> load, leaderboard, charts, report.

The records are realistic: every problem of the shipped library on two GPUs, six candidates, every
status, several runs per workload; times follow from T_ideal and a chosen SOL (tests/record_factory).
Prints a timing table and writes results/presentation_scale.json.

    python benchmarks/presentation_scale.py [--records 10000] [--jobs N] [--out results/presentation_scale.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the record factory the tests use

import matplotlib  # noqa: E402
import pandas  # noqa: E402
import record_factory as rf  # noqa: E402
from rich.console import Console  # noqa: E402

import solbench  # noqa: E402
from solbench.data.hardware import load_spec  # noqa: E402
from solbench.data.problem import find_problems, load_problem  # noqa: E402
from solbench.data.record import Status  # noqa: E402
from solbench.data.roofline import workload_point  # noqa: E402
from solbench.errors import SolbenchError  # noqa: E402
from solbench.present.leaderboard import format_leaderboard, print_leaderboard  # noqa: E402

CANDIDATES = ("torch_eager", "torch_compile", "triton_v1", "triton_v2", "cupy_raw", "cuda_inline")
GPUS = {"h200_sxm": "NVIDIA H200", "h100_sxm": "NVIDIA H100 80GB HBM3"}
FAILURES = (Status.INCORRECT, Status.RUNTIME_ERROR, Status.COMPILE_ERROR, Status.TIMEOUT, Status.REWARD_HACK)


def synthetic_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    problems = []
    for f in find_problems(ROOT / "problems"):
        try:
            problems.append(load_problem(f))
        except SolbenchError:
            continue
    cells = []
    for gpu, device in GPUS.items():
        spec = load_spec(gpu)
        for prob in problems:
            for wl in prob.workloads:
                try:
                    pt = workload_point(prob, wl, spec)
                except SolbenchError:
                    continue  # a precision this GPU has no peak for
                cells.extend((prob, pt, spec, device, cand) for cand in CANDIDATES)
    out: list[dict] = []
    run = 0
    while len(out) < n:
        for prob, pt, spec, device, cand in cells:
            if len(out) == n:
                break
            failed = rng.random() < 0.08
            status = rng.choice(FAILURES) if failed else Status.PASSED
            sol = round(min(0.98, rng.lognormvariate(-0.6, 0.45)), 4) if not failed else None
            rec = rf.make_record(prob, pt, spec, cand, status, sol, device=device,
                                 timestamp=f"2026-11-29T{10 + run % 10:02d}:{run % 60:02d}:00+00:00")
            out.append(rec.model_dump(mode="json"))
        run += 1
    return out


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the report's chart workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(label: str, fn, timings: dict[str, dict[str, float]]):
    """Wall and CPU time of one step. On a shared machine the CPU time is the steadier number."""
    c0, t0 = _cpu_s(), time.perf_counter()
    result = fn()
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    timings[label] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
    print(f"{label:<44} {wall:8.2f} s wall {cpu:8.2f} s CPU", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=None, help="chart-drawing processes for the report")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "presentation_scale.json")
    args = ap.parse_args()

    records = synthetic_records(args.records)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "results.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        t: dict[str, dict[str, float]] = {}
        print(f"{len(records)} records, {path.stat().st_size / 1e6:.1f} MB of JSONL, {os.cpu_count()} CPUs")
        df = timed("load_results", lambda: solbench.load_results(path, warn=False), t)
        lb = timed("leaderboard (all problems, both GPUs)", lambda: solbench.leaderboard(df), t)
        timed("  print as rich tables", lambda: print_leaderboard(lb, Console(file=io.StringIO(), width=120)), t)
        for fmt in ("markdown", "csv", "json", "html"):
            timed(f"  format {fmt}", lambda fmt=fmt: format_leaderboard(lb, fmt), t)
        h200 = solbench.Selection(gpu="h200_sxm")
        timed("plot roofline (one GPU, every problem) PNG",
              lambda: solbench.plot_roofline(df, tmp / "roofline.png", h200), t)
        five = solbench.Selection(gpu="h200_sxm", problem=sorted(df["problem"].unique())[:5])
        timed("plot sol (one GPU, 5 problems) PNG", lambda: solbench.plot_sol(df, tmp / "sol.png", five), t)
        timed("report, no charts", lambda: solbench.write_report(df, tmp / "r0.html", charts="none"), t)
        timed("report, one GPU, SVG charts",
              lambda: solbench.write_report(df, tmp / "r1.html", h200, workers=args.jobs), t)
        timed("report, both GPUs, SVG charts",
              lambda: solbench.write_report(df, tmp / "r2.html", workers=args.jobs), t)
        sizes = {p.name: p.stat().st_size for p in tmp.glob("*.html")}
    n_sections = int(df.groupby(["problem", "gpu"]).ngroups)
    result = {
        "records": len(records),
        "problems": int(df["problem"].nunique()),
        "report_sections": n_sections,
        "seconds": t,
        "load_average": list(os.getloadavg()),
        "report_bytes": sizes,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"solbench": solbench.__version__, "pandas": pandas.__version__,
                     "matplotlib": matplotlib.__version__},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
