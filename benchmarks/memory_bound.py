"""The least wall a library pass can take for the device's memory alone, from the records of an earlier pass.

A record reserves ``record_bytes`` of device memory (:mod:`solbench.engine.pipeline`) from before its cases until
it is written; the records in flight share the run's budget. Over a pass, the reservations' GiB-seconds (GiB
reserved x seconds held, the phases before a reservation left out: ``library_throughput.OUTSIDE_RESERVATION``)
divided by the budget is the least wall that memory allows. For the whole library it is estimated by giving each
planned record the median time held by the records of similar size (half to twice its reservation) in the pass
read, or by all of them where none is similar::

    python benchmarks/memory_bound.py results/h200/runs_2026-12-03/library_throughput_call31.jsonl.gz

prints ``{"records", "gib_s", "wall_bound_s", "by_phase", "library": {"records", "gib_s", "wall_bound_s"}}``
(budget: ``--budget-gib``, the H200's 78.29 by default: 0.7 of its memory less the cases' share).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from solbench.api import plan_run
from solbench.data import find_problems, problems_root, read_records
from solbench.engine.ledger import PHASES
from solbench.engine.pipeline import record_bytes

GIB = 1 << 30
H200_BUDGET_GIB = 78.29  # 140 GiB x 0.7 x (1 - the cases' 0.2), as the H200 runs logged it
H200_L2_BYTES = 60 << 20


def _library_pass() -> Any:
    """benchmarks/library_throughput.py, whose ``memory_seconds`` and ``OUTSIDE_RESERVATION`` this reads."""
    here = Path(__file__).with_name("library_throughput.py")
    spec = importlib.util.spec_from_file_location("library_throughput", here)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows_of(records: list[dict[str, Any]], sizes: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    """The records as the library pass's rows (GiB reserved, harness phases); those the plan does not size left out."""
    rows = []
    for r in records:
        gib = sizes.get((r["problem"], r["workload"]))
        harness = r.get("harness") or {}
        if gib is not None:
            rows.append({"reserved_gib": gib, "phases": {k: float(v) for k, v in harness.items()
                                                         if k in PHASES and isinstance(v, (int, float))}})
    return rows


def bound(records: list[dict[str, Any]], sizes: dict[tuple[str, str], float], budget_gib: float,
          library_pass: Any) -> dict[str, Any]:
    """GiB-seconds of the records (``sizes``: GiB reserved by (problem, workload)) by phase, and over the budget
    the least wall; then the same for every planned record, each held for the median time of the records of
    similar size read here."""
    rows = rows_of(records, sizes)
    by_phase = library_pass.memory_seconds(rows) or {}
    total = sum(by_phase.values())
    out: dict[str, Any] = {"records": len(rows), "gib_s": round(total), "wall_bound_s": round(total / budget_gib, 1),
                           "by_phase": {k: round(v) for k, v in by_phase.items()}}
    seen = [(r["reserved_gib"], sum(s for k, s in r["phases"].items() if k not in library_pass.OUTSIDE_RESERVATION))
            for r in rows]
    if seen:
        library = 0.0
        candidates = 2  # torch_eager and one more, as the library pass runs
        for gib in sizes.values():
            near = [s for g, s in seen if gib / 2 <= g <= 2 * gib] or [s for _, s in seen]
            library += candidates * gib * statistics.median(near)
        out["library"] = {"records": candidates * len(sizes), "gib_s": round(library),
                          "wall_bound_s": round(library / budget_gib, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", help="records of a library pass (.jsonl or .jsonl.gz)")
    ap.add_argument("--budget-gib", type=float, default=H200_BUDGET_GIB)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    records, warnings = read_records(args.records)
    for w in warnings:
        print(w, file=sys.stderr)
    if not records:
        raise SystemExit(f"memory_bound: no record read from {' '.join(args.records)}; name a library pass's records "
                         "(.jsonl or .jsonl.gz)")
    plan = plan_run(find_problems(problems_root(None)))
    sizes = {(i.problem.name, w.name): record_bytes(i.problem, w, args.rounds, "cuda", H200_L2_BYTES) / GIB
             for i in plan for w in i.workloads}
    print(json.dumps(bound(records, sizes, args.budget_gib, _library_pass()), indent=1))


if __name__ == "__main__":
    main()
