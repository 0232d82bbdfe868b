"""The harness's fixed start costs: a worker's start, a problem host's, and one small record end to end.

    python benchmarks/startup_cost.py --label after --repeat 3 -o results/startup_cost_cpu.json
    PYTHONPATH=OTHER_CHECKOUT python benchmarks/startup_cost.py --label before ...  # the same, other code

Per repeat: a candidate worker spawned and waited for until it is up (its hello: torch imported, the
sandbox entered), as a run starts one (the run's worker user when this process is root); a problem
host's first request (its start and a cost request); ``solbench run tests/fixtures/tiny/ragged_sum
--device cpu --workload b4`` as a subprocess (its wall and the record's ``harness``). Medians of the
repeats, and the bytecode caches missing before and after them (:mod:`solbench.engine.bytecode`); the
worker's imports timed in a fresh interpreter with the caches and without any (all compiled from source). ``--throughput FILE...`` folds in ``library_throughput.py`` summaries (records, wall, the
records' phase totals read back from their records file). The output file keeps one entry per label.
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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import solbench
from solbench.data.problem import load_problem
from solbench.engine.ledger import PHASES
from solbench.engine.options import default_worker_user
from solbench.engine.problem_host import new_host
from solbench.guards import resolve_account
from solbench.worker import WorkerClient

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "fixtures" / "tiny" / "ragged_sum"
CODE = Path(solbench.__file__).resolve().parents[1]  # the checkout measured (PYTHONPATH's, else this one)
HARNESS_KEYS = ("worker_start_s", "worker_wait_s", "cases_s", "rounds_s", "timing_request_s", "wall_s")


def worker_start() -> float:
    """Seconds from a worker's spawn to its hello."""
    client = WorkerClient("cpu", account=resolve_account(default_worker_user()))
    client.spawn()
    try:
        client.wait_ready(120)
        return client.up_at - client.spawned_at
    finally:
        client.discard()


def host_start() -> float:
    """Seconds of a fresh problem host's first request (its start, then a cost hook's call)."""
    problem = load_problem(RECORD)
    host = new_host("cpu")
    began = time.monotonic()
    try:
        host.workload_cost(problem, problem.resolve_axes(problem.workloads[0]), {})
        return time.monotonic() - began
    finally:
        host.close()


def worker_imports(without_bytecode: bool) -> float:
    """Seconds a fresh interpreter takes to import what a worker imports at start; ``without_bytecode``:
    every module compiled from source (an empty cache folder, nothing written), as a worker does where
    no cache was ever written."""
    with tempfile.TemporaryDirectory(prefix="solbench-nocache-") as empty:
        env = dict(os.environ, **({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty} if without_bytecode
                                  else {}))
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "import torch, solbench.worker.main"], check=True, env=env, cwd=CODE)
        return time.monotonic() - began


def one_record() -> dict[str, float]:
    """``solbench run`` of one small record: the command's wall and its record's harness seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.jsonl"
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "solbench", "run", str(RECORD), "--device", "cpu", "--workload", "b4",
                        "-o", str(out)], check=True, capture_output=True, cwd=CODE)
        wall = time.monotonic() - began
        harness = json.loads(out.read_text().splitlines()[0])["harness"]
    return {"command_s": wall, **{k: float(harness.get(k) or 0.0) for k in HARNESS_KEYS}}


def throughput(path: Path) -> dict[str, Any]:
    """A library_throughput summary's totals, the phases summed from its records file."""
    summary = json.loads(path.read_text())
    records = [json.loads(line) for line in Path(summary["records_file"]).read_text().splitlines() if line.strip()]
    phases = {k: round(sum(float((r.get("harness") or {}).get(k) or 0.0) for r in records), 2) for k in PHASES}
    starts = [float(r["harness"]["worker_start_s"]) for r in records if (r.get("harness") or {}).get("worker_start_s")]
    return {"file": path.name, "records": len(records), "wall_s": summary.get("wall_s"),
            "records_per_min": summary.get("records_per_min"), "problems": summary.get("problems"),
            "phases_s": phases, "median_worker_start_s": round(statistics.median(starts), 3) if starts else None}


def bytecode_state() -> dict[str, Any]:
    """The ``.py`` files without a current cached ``.pyc`` in the packages a run primes (engine.bytecode)."""
    try:
        from solbench.engine import bytecode
    except ImportError:  # code from before it
        return {"dont_write_bytecode": sys.dont_write_bytecode}
    folders = {p: bytecode._folder(p) for p in bytecode.PACKAGES}
    return {"dont_write_bytecode": sys.dont_write_bytecode,
            "missing": {p: len(bytecode.missing_bytecode(f)) if f else None for p, f in folders.items()}}


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()}


def commit() -> str:
    done = subprocess.run(["git", "-C", str(CODE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def measure(repeat: int) -> dict[str, Any]:
    """The repeats and their medians; the bytecode caches before and after (the first ``solbench run``
    writes those missing, where it may: a first repeat slower than the others is that)."""
    before = bytecode_state()
    rows = [{"worker_start_s": worker_start(), "host_first_request_s": host_start(), **one_record(),
             "worker_imports_s": worker_imports(False), "worker_imports_without_bytecode_s": worker_imports(True)}
            for _ in range(repeat)]
    return {"bytecode_before": before, "bytecode_after": bytecode_state(), "repeats": rows,
            "median": {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="this entry's name (before, after, ...)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--throughput", nargs="*", default=[], help="library_throughput.py summaries to fold in")
    ap.add_argument("--commit", default=None, help="the code's commit, where its folder is no git checkout")
    ap.add_argument("-o", "--output", default="results/startup_cost_cpu.json")
    args = ap.parse_args()
    out = Path(args.output)
    doc = json.loads(out.read_text()) if out.exists() else {"what": __doc__.splitlines()[0], "entries": {}}
    entry = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ"), "commit": args.commit or commit(),
             "machine": machine(), **measure(args.repeat),
             "throughput": [throughput(Path(p)) for p in args.throughput]}
    doc["entries"][args.label] = entry
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"label": args.label, "median": entry["median"]}))


if __name__ == "__main__":
    main()
