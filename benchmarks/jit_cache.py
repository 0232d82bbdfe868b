"""What --jit-cache saves: a torch.compile candidate's first record, cold (empty store) then warm.

Runs the same candidates on the same workload twice, each time in a fresh `solbench run` (new
workers), with one fresh store, and compares the first record's harness times per candidate: the
worker's first call (compiling) and the whole record's wall time. Prints a table and writes
``results/jit_cache_<device>.json``.

    python benchmarks/jit_cache.py                                   # cuda if present, else cpu
    python benchmarks/jit_cache.py --problem llama3_1_8b.swiglu --workload decode_b1
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from solbench.api import plan_run, resolve_options, run_plan
from solbench.data.record import ResultRecord


class FirstRecords:
    """Progress hooks that keep each record's wall time (from its task starting to it being written)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self._start = 0.0

    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self._start = time.perf_counter()

    def record(self, record: ResultRecord) -> None:
        harness = record.harness or {}
        self.rows.append({"candidate": record.solution, "status": record.status,
                          "wall_s": time.perf_counter() - self._start, "first_call_s": harness.get("first_call_s"),
                          "load_s": harness.get("load_s"), "restored_bytes": harness.get("jit_cache_restored_bytes")})


def one_pass(names: list[str], workload: str, include: list[str], store: Path, device: str | None) -> list[dict]:
    options = resolve_options(device=device, jit_cache=store, workers_ahead=0, budget_s=0.1)
    plan = plan_run(names, workloads=[workload])
    for item in plan:
        item.candidates = [c for c in item.candidates if c.name in include]
    hooks = FirstRecords()
    with tempfile.TemporaryDirectory() as tmp:
        run_plan(plan, options, Path(tmp) / "records.jsonl", hooks)
    return hooks.rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="llama3_1_8b.rmsnorm")
    parser.add_argument("--workload", default="decode_b1")
    parser.add_argument("--candidates", nargs="+", default=["torch_compile", "torch_eager"])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("-o", "--output", default=None, help="JSON path (default results/jit_cache_<device>.json)")
    args = parser.parse_args()
    device = resolve_options(device=args.device).device
    with tempfile.TemporaryDirectory() as store:
        cold = one_pass([args.problem], args.workload, args.candidates, Path(store), device)
        warm = one_pass([args.problem], args.workload, args.candidates, Path(store), device)
    rows = [{"candidate": c["candidate"], "cold": c, "warm": w} for c, w in zip(cold, warm, strict=True)]
    out = Path(args.output or f"results/jit_cache_{'cuda' if device.startswith('cuda') else 'cpu'}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    out.write_text(json.dumps({"device": device, "problem": args.problem, "workload": args.workload,
                               "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                               "cpu_count": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    table = Table(title=f"first record, cold vs warm JIT cache ({args.problem} {args.workload}, {device}; seconds)")
    for col in ("candidate", "first call cold", "first call warm", "record cold", "record warm", "restored"):
        table.add_column(col, justify="left" if col == "candidate" else "right")
    for r in rows:
        c, w = r["cold"], r["warm"]
        table.add_row(r["candidate"], f"{c['first_call_s'] or 0:.2f}", f"{w['first_call_s'] or 0:.2f}",
                      f"{c['wall_s']:.2f}", f"{w['wall_s']:.2f}", f"{(w['restored_bytes'] or 0) / 1e6:.2f} MB")
    Console().print(table)
    print(f"written {out}")


if __name__ == "__main__":
    main()
