"""How fast the harness gets through the whole problem library: records per minute and where each record's time goes.

Runs every problem of the library, all workloads, ``torch_eager`` plus one more candidate (the
first of ``--second``'s globs that a problem ships: a Triton kernel, else torch.compile). By
default in this process on one device, pipelined (``--in-flight N`` lanes at once, only timing
windows exclusive: :mod:`solbench.engine.pipeline`); ``--gpus``, ``--jobs`` or ``--cluster`` run
on executors instead. Records are appended to ``--records`` as they finish, and the summary is
rewritten after each one, so a run stopped by ``--time-box`` (no new record starts after it) or
killed (``timeout 540 python ...``) leaves both:

    {"complete", "problems", "records", "wall_s", "steady_median_record_s", "phases_s": {phase: total},
     "records_per_min", "overhead_by_size", "statuses", "gate": {...}, "goal": {...}, "rows": [...]}

``steady_median_record_s``: the run's pace once records flow: the median, over consecutive groups
of ``STEADY_GROUP`` records after the first, of the group's span divided by its records (a record
every so many seconds; pipelined, a record's own wall is longer). ``phases_s``: the records'
``harness`` phases summed (:mod:`solbench.engine.ledger`), with ``unaccounted_s`` (their walls less
their phases). ``gate``: the seconds timing windows held the device alone, and their share of the
run. A record's overhead is its wall (``harness.wall_s``) less the candidate's timed samples;
``edge`` is what the edge rounds took of it (``--no-edge`` runs without them); ``window`` where the timing
windows (the device held alone) went, by part (``harness.window``), and ``request`` the worker's split of the
timing request inside it (``timing.details``: its reading, the timer, the probe, the guards' checks). The goal
(issue 26): the whole library (>= 68 problems) in <= 300 s, a record every <= 0.3 s.

    python benchmarks/library_throughput.py --budget 0.3 -o results/h200/library_throughput.json
    python benchmarks/library_throughput.py --device cpu --only 'llama3_1_8b.rms*' --smallest-only
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
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
from solbench.engine.gate import DeviceGate, overlaps
from solbench.engine.ledger import PHASES
from solbench.engine.options import dispatched
from solbench.engine.pipeline import (
    CACHE_SHARE,
    MemoryGate,
    memory_budget,
    record_bytes,
)
from solbench.engine.runner import PlanItem, Runner

MIB = 1 << 20
BUCKETS = [(256 * MIB, "<=256MiB"), (1024 * MIB, "256MiB-1GiB"), (4096 * MIB, "1-4GiB"), (None, ">4GiB")]
GOAL = {"wall_s_max": 300.0, "problems_min": 68, "steady_median_record_s_max": 0.3}
STEADY_GROUP = 16
# The summary is rewritten at most this often while records come (and at the end), the gate's holds less often:
# each write walks every row and hold, under the runner's lock, in the parent (H200 call 28: a write after
# every record took half of the parent's GIL time at 200 records, and grew with the run).
SUMMARY_EVERY_S = 5.0
INTERVALS_EVERY_S = 30.0


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


def steady_pace(stamps: list[float], group: int = STEADY_GROUP) -> float | None:
    """Seconds per record once records flow: the median over consecutive groups of ``group``
    records (after the first record) of the group's span over its records; None with too few."""
    after = stamps[1:]
    spans = [(after[i + group - 1] - after[i]) / (group - 1) for i in range(0, len(after) - group + 1, group)]
    if not spans and len(after) >= 3:
        spans = [(after[-1] - after[0]) / (len(after) - 1)]
    return round(statistics.median(spans), 4) if spans else None


def phase_totals(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each harness phase summed over the records, and what the phases leave of their walls."""
    totals = {name: round(sum(r["phases"].get(name, 0.0) for r in rows), 3) for name in PHASES}
    totals["unaccounted_s"] = round(sum(r["wall_s"] for r in rows) - sum(totals.values()), 3)
    return totals


# A record's phases before it reserves its memory: the wait for it, and on a GPU its lane's worker start, load and
# warm-up (solbench.engine.runner.Runner._prepare; a retry's fresh worker starts inside, rarely).
OUTSIDE_RESERVATION = frozenset({"memory_wait_s", "warm_s", "worker_wait_s", "load_s"})


def memory_seconds(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """GiB-seconds of the records' memory reservations by phase (each row's ``reserved_gib``, a first attempt's, times
    its phases; those before its reservation, ``OUTSIDE_RESERVATION``, left out), largest first: in a pass bound by the device's memory, what the
    reservations are held for. Over the budget it is the least wall that memory allows (H200 call 30: 15,400
    GiB-s, 197 s of 78 GiB, in a 365 s pass)."""
    rows = [r for r in rows if r.get("reserved_gib")]
    if not rows:
        return None
    out: dict[str, float] = {}
    for r in rows:
        for name, seconds in r["phases"].items():
            if name not in OUTSIDE_RESERVATION:
                out[name] = out.get(name, 0.0) + r["reserved_gib"] * seconds
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def gate_summary(gate: DeviceGate | None, wall: float) -> dict[str, Any] | None:
    """How long timing windows held the device alone (the floor of a pipelined run's wall)."""
    if gate is None:
        return None
    windows = [i for i in gate.intervals if i.exclusive]
    alone = sum(i.end - i.start for i in windows)
    by_kind = {k: round(sum(i.end - i.start for i in windows if i.kind == k), 2) for k in sorted({i.kind for i in windows})}
    return {"timing_windows": sum(i.kind == "time" for i in windows), "exclusive_windows": len(windows),
            "exclusive_s": round(alone, 2), "exclusive_by_kind_s": by_kind,
            "exclusive_share": round(alone / wall, 3) if wall else None, "overlaps": len(overlaps(gate.intervals)),
            "locks": gate.locks, "lock_s": round(gate.lock_s, 3), "lock_failures": gate.lock_failures,
            "unlock_failures": gate.unlock_failures,
            "lock_refusals": dict(getattr(gate.lock, "refusals", {})),  # the driver's codes, by count
            "refused_kinds": dict(gate.refused_kinds),  # the refused holds' kinds (* long)
            "waits_s": {k: round(v, 2) for k, v in gate.waits_s.items()},  # device_wait_s by cause
            "shared_by_kind": shared_by_kind(gate.intervals)}


def shared_by_kind(intervals: list[Any]) -> dict[str, dict[str, float]]:
    """Untimed holds per kind: how many, their seconds in all and the longest (what a timing window waits for)."""
    out: dict[str, dict[str, float]] = {}
    for i in intervals:
        if i.exclusive:
            continue
        row = out.setdefault(i.kind, {"n": 0, "total_s": 0.0, "max_s": 0.0})
        row["n"] += 1
        row["total_s"] = round(row["total_s"] + i.end - i.start, 3)
        row["max_s"] = round(max(row["max_s"], i.end - i.start), 3)
    return out


def write_intervals(gate: DeviceGate | None, path: Path | None) -> None:
    """Every hold of the gate (owner, kind, pid, start and end from the first), for the timeline."""
    if gate is None or path is None or not gate.intervals:
        return
    t0 = min(i.start for i in gate.intervals)
    rows = [[i.owner, i.kind, i.exclusive, i.pid, round(i.start - t0, 4), round(i.end - t0, 4)] for i in gate.intervals]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fields": ["owner", "kind", "exclusive", "pid", "start_s", "end_s"], "rows": rows}))


def edge_share(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the edge rounds cost: their seconds (the worker calls and the parent's references, harness.edge_s +
    edge_prepare_s) over the wall time of the records that reached them, in all and per record (the goal:
    at most 10%)."""
    ran = [r for r in rows if r.get("edge_s") and r.get("wall_s")]  # records that reached the edge rounds
    shares = [r["edge_s"] / r["wall_s"] for r in ran]
    total = sum(r["wall_s"] for r in ran)
    return {"records": len(ran), "edge_s": round(sum(r["edge_s"] for r in ran), 3),
            "share_of_wall": round(sum(r["edge_s"] for r in ran) / total, 4) if total else None,
            "median_share": round(statistics.median(shares), 4) if shares else None,
            "p90_share": round(percentile(shares, 0.9), 4) if shares else None, "goal_share_max": 0.10}


def device_memory(device: str | None, gate: MemoryGate | None = None) -> dict[str, float] | None:
    """GiB as a record ends: the device's free memory, the parent's tensors and caching allocator (its
    device pools and context are the rest of its use, which NVML counts), and what the records in flight
    had reserved (``gate``'s estimate: set beside what the device really has in use)."""
    if not (device or "").startswith("cuda"):
        return None
    import torch

    gib = 1 << 30
    free, total = torch.cuda.mem_get_info()
    return {"device_free": round(free / gib, 2), "device_used": round((total - free) / gib, 2),
            "parent_allocated": round(torch.cuda.memory_allocated() / gib, 2),
            "parent_reserved": round(torch.cuda.memory_reserved() / gib, 2)} | (
        {"records_reserved": round(gate.held / gib, 2)} if gate is not None else {})


_NVML: list[Any] = []  # (pynvml, the device's handle), made at the first use; [None] where NVML cannot


def memory_by_role(runner: Runner | None) -> dict[str, Any] | None:
    """GiB each kind of process holds on the device as a record ends, by NVML (every process's use, its
    context included): the parent, the problem hosts, the workers (with their count and the largest), and what
    NVML names that is none of them. Where NVML's pids are not this container's (the parent is not among them):
    the total and the count only. What the reservations miss shows here by role."""
    if runner is None or not runner.options.device.startswith("cuda"):
        return None
    if not _NVML:
        try:
            import pynvml

            pynvml.nvmlInit()
            from solbench.worker import device_index

            _NVML.append((pynvml, pynvml.nvmlDeviceGetHandleByIndex(device_index(runner.options.device) or 0)))
        except Exception:  # noqa: BLE001 - a diagnostic: none without NVML
            _NVML.append(None)
    if _NVML[0] is None:
        return None
    nvml, handle = _NVML[0]
    try:
        used = {int(p.pid): int(p.usedGpuMemory or 0) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    except Exception:  # noqa: BLE001
        return None
    gib = 1 << 30
    hosts = runner.hosts.pids()
    parent = os.getpid()
    if parent not in used:
        return {"processes": len(used), "total": round(sum(used.values()) / gib, 2), "pids_visible": False}
    workers = [b for pid, b in used.items() if pid != parent and pid not in hosts]
    return {"parent": round(used[parent] / gib, 2), "hosts": round(sum(used.get(p, 0) for p in hosts) / gib, 2),
            "workers": round(sum(workers) / gib, 2), "workers_n": len(workers),
            "worker_max": round(max(workers, default=0) / gib, 2), "processes": len(used)}


def memory_summary(gate: MemoryGate | None) -> dict[str, Any] | None:
    """The memory gate's budget and the lane-seconds records waited at it, by cause
    (:attr:`solbench.engine.pipeline.MemoryGate.waits_s`). These count the waits of records the time box stopped
    before they began too, which no record's ``memory_wait_s`` holds (H200 call 28: 896 s here, 342 s in the
    records)."""
    if gate is None:
        return None
    return {"budget_gib": round(gate.budget / (1 << 30), 2),
            "waits_s": {cause: round(s, 2) for cause, s in gate.waits_s.items()}}


# The worker's own split of a timing request (``timing.details``): with the parent's ``window.request_s``, what
# the transport and the parent's reading took (the request less these).
REQUEST_PARTS = ("worker_receive_s", "worker_timer_s", "warmup_s", "sampling_s", "trace_s", "worker_probe_s",
                 "worker_findings_s", "worker_rest_s")


def request_parts(record: ResultRecord) -> dict[str, float] | None:
    """The worker's parts of the record's timing request, where it reported them."""
    details = (record.timing or {}).get("details") or {}
    parts = {k: float(details[k]) for k in REQUEST_PARTS if isinstance(details.get(k), (int, float))}
    return parts or None


def window_parts(rows: list[dict[str, Any]], key: str = "window") -> dict[str, Any] | None:
    """Where the records' timing windows went (``harness.window``; ``key="request"``: the worker's split of the
    timing request, :func:`request_parts`): each part's total and median, seconds."""
    windows = [r[key] for r in rows if r.get(key)]
    if not windows:
        return None
    names = sorted({k for w in windows for k in w})
    return {"records": len(windows),
            "total_s": {k: round(sum(w.get(k) or 0.0 for w in windows), 3) for k in names},
            "median_s": {k: round(statistics.median(w.get(k) or 0.0 for w in windows), 4) for k in names}}


class Tally:
    """Progress hooks: one row per record, and the summary rewritten to ``path`` after each."""

    def __init__(self, path: Path, meta: dict[str, Any], time_box: float | None = None):
        self.path, self.meta, self.rows = path, meta, []
        self.t0 = time.perf_counter()
        self.started: dict[str, float] = {}
        self.statuses: Counter[str] = Counter()
        self.stamps: list[float] = []  # seconds from the start to each record
        self.time_box = time_box
        self.runner: Runner | None = None  # the plain run's: stopped at the time box, its gate summarised
        self.intervals: Path | None = None  # where the gate's holds are written (every INTERVALS_EVERY_S, and at the end)
        self._written = self._intervals_written = float("-inf")  # when the summary and the holds were last written
        self.reserved: dict[tuple[str, str], float] = {}  # GiB a record of (problem, workload) reserves, by the plan

    def begin(self, total: int) -> None:
        self.meta["records_planned"] = total
        self.write(complete=False)

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.started[f"{problem}/{workload}/{candidate}"] = time.perf_counter()

    def record(self, record: ResultRecord) -> None:
        harness = record.harness or {}
        wall = harness.get("wall_s")
        if wall is None:  # a record without one (an executor that could not finish it): this process's clock
            wall = time.perf_counter() - self.started.get(f"{record.problem}/{record.workload}/{record.solution}",
                                                          self.t0)
        timed = float(sum(record.timing.get("samples_s") or []))
        edge = float(harness.get("edge_s") or 0.0) + float(harness.get("edge_prepare_s") or 0.0)
        self.rows.append({"problem": record.problem, "workload": record.workload, "candidate": record.solution,
                          "status": record.status, "bytes": record.bytes, "bucket": bucket(record.bytes),
                          "wall_s": round(wall, 4), "overhead_s": round(wall - timed, 4), "edge_s": round(edge, 4),
                          "phases": {k: round(float(v), 4) for k, v in harness.items() if k in PHASES},
                          "reserved_gib": self.reserved.get((record.problem, record.workload)),
                          "window": harness.get("window"), "request": request_parts(record),
                          "memory": device_memory(self.meta.get("device"), self._memory_gate()),
                          "by_role": memory_by_role(self.runner),
                          "device_index": record.device_index, "host": record.host})
        self.statuses[record.status] += 1
        self.stamps.append(time.perf_counter() - self.t0)
        now = time.perf_counter()
        if now - self._written >= SUMMARY_EVERY_S:  # a run killed at its limit keeps a summary this recent
            self.write(complete=False)
            self._written = now
        if now - self._intervals_written >= INTERVALS_EVERY_S and self.runner is not None:
            write_intervals(self.runner.gate, self.intervals)
            self._intervals_written = now
        if self.time_box is not None and self.stamps[-1] > self.time_box and self.runner is not None:
            self.runner.stop()  # the records in flight finish; no new one starts

    def _memory_gate(self) -> MemoryGate | None:
        return self.runner.memory if self.runner is not None else None

    def write(self, complete: bool) -> dict[str, Any]:
        wall = time.perf_counter() - self.t0
        problems = len({r["problem"] for r in self.rows})
        steady = steady_pace(self.stamps)
        summary = self.meta | {
            "complete": complete, "problems": problems, "records": len(self.rows), "wall_s": round(wall, 2),
            "steady_median_record_s": steady, "phases_s": phase_totals(self.rows),
            "memory_gib_s": memory_seconds(self.rows),
            "gate": gate_summary(self.runner.gate if self.runner is not None else None, wall),
            "memory_gate": memory_summary(self._memory_gate()),
            "records_per_min": round(len(self.rows) / wall * 60, 2) if wall else None,
            # Past the fixed start (imports, the first workers): what a comparison of two placements needs.
            "setup_s": round(self.stamps[0], 2) if self.stamps else None,
            "steady_records_per_min": (round((len(self.stamps) - 1) / (self.stamps[-1] - self.stamps[0]) * 60, 2)
                                       if len(self.stamps) > 2 else None),
            "statuses": dict(self.statuses), "overhead_by_size": overhead_by_size(self.rows),
            "edge": edge_share(self.rows), "window": window_parts(self.rows),
            "request": window_parts(self.rows, "request"),
            "goal": GOAL | {"met": bool(complete and wall <= GOAL["wall_s_max"] and problems >= GOAL["problems_min"]
                                        and steady is not None and steady <= GOAL["steady_median_record_s_max"])},
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


def tune_gate(gate: DeviceGate, args: argparse.Namespace) -> None:
    """The gate's policy as the arguments set it (the rest, and its driver lock, as the run made it)."""
    if args.gate_batch is not None:
        gate.batch = max(1, args.gate_batch)
    if args.gate_delay is not None:
        gate.max_delay_s = max(0.0, args.gate_delay)
    if args.gate_slice is not None:
        gate.slice_s = max(0.0, args.gate_slice)
    gate.fair = gate.fair or args.gate_fair


def tune_memory(runner: Runner, share: float | None) -> None:
    """The records' memory budget as ``--memory-share`` sets it: that share of the device's memory (of the host's
    available memory on the CPU), split between the records in flight and the cases kept, as the run splits it."""
    if share is None:
        return
    budget = memory_budget(runner.options.device, share)
    runner.memory.budget = int(budget * (1 - CACHE_SHARE))
    runner.cases.cap_bytes = int(budget * CACHE_SHARE)


def not_negative(text: str) -> float:
    """``--prepare-ahead``, ``--memory-age``: a number >= 0 (``inf`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count or seconds >= 0: give e.g. 0, 4 or inf")
    return value


def share(text: str) -> float:
    """``--memory-share``: a fraction in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of the device's memory: give one in (0, 1], e.g. 0.7")
    return value


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="results/h200/library_throughput.json")
    ap.add_argument("--records", default=None, help="JSONL of the records (default: next to --output, dated)")
    ap.add_argument("--problems", default=None, help="problems folder (default: the library)")
    ap.add_argument("--only", nargs="*", default=[], help="problem-name globs")
    ap.add_argument("--second", nargs="*", default=["triton_*", "torch_compile*"],
                    help="globs for the second candidate, first match wins")
    ap.add_argument("--smallest-only", action="store_true", help="each problem's smallest workload (quick checks)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--in-flight", type=int, default=0, help="lanes at once in the plain run (0: by core count)")
    ap.add_argument("--gate-batch", type=int, default=None,
                    help="timings gathered before untimed work is held back (default: the engine's)")
    ap.add_argument("--gate-delay", type=float, default=None, help="the longest a timing waits for its batch, s")
    ap.add_argument("--gate-slice", type=float, default=None,
                    help="after a window, how long the untimed work runs before the next timing, s")
    ap.add_argument("--gate-fair", action="store_true",
                    help="phase-fair: a request that waited through a window starts before the next timing")
    ap.add_argument("--memory-share", type=share, default=None,
                    help="share of the device's memory the records in flight and kept cases may hold (default: the engine's)")
    ap.add_argument("--prepare-ahead", type=not_negative, default=None,
                    help="lanes made ready ahead at once on a GPU (0: none; default solbench.engine.ahead's)")
    ap.add_argument("--memory-age", type=not_negative, default=None,
                    help="seconds a record waits for memory before it keeps its room (default the settings'; inf: never)")
    ap.add_argument("--time-box", type=float, default=None,
                    help="seconds after which no new record starts (those in flight finish); complete stays false")
    ap.add_argument("--gpus", default=None, help="run on executors, one per GPU (all or 0,1,...)")
    ap.add_argument("--jobs", type=int, default=None, help="run on N executors on the CPU")
    ap.add_argument("--cluster", default=None, help="ray or ray://HOST:PORT")
    ap.add_argument("--no-edge", action="store_true", help="without the edge rounds (to measure what they cost)")
    ap.add_argument("--small", action="store_true", help="each problem shrunk to its test_axes (quick CPU runs)")
    ap.add_argument("--intervals", default=None, help="write every hold of the device gate here (JSON)")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=60.0)
    return ap.parse_args()


def main() -> None:
    args = arguments()
    options = resolve_options(device=args.device, budget_s=args.budget, timeout_s=args.timeout,
                              in_flight=args.in_flight, gpus=args.gpus, jobs=args.jobs, cluster=args.cluster,
                              edge_rounds=False if args.no_edge else None)
    plan = select(plan_run(find_problems(problems_root(args.problems)), small=args.small), args.second, args.only,
                  args.smallest_only)
    out = Path(args.output)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    records = Path(args.records or out.with_name(f"{out.stem}_{stamp}.jsonl"))
    plain = not dispatched(options)
    meta = {"device": options.device, "placement": {"gpus": options.gpus, "jobs": options.jobs,
                                                    "cluster": options.cluster, "plain": plain},
            "budget_s": options.budget_s, "problems_planned": len(plan), "records_file": records.as_posix(),
            "started": stamp, "time_box_s": args.time_box, "steady_group": STEADY_GROUP}
    tally = Tally(out, meta, args.time_box)
    tally.intervals = Path(args.intervals) if args.intervals else None
    print(f"{len(plan)} problems, {sum(len(i.workloads) * len(i.candidates) for i in plan)} records planned", flush=True)
    if plain:
        tally.runner = runner = Runner(options, records, tally)
        tally.reserved = {(i.problem.name, w.name): record_bytes(i.problem, w, options.rounds, runner.timing.device,
                                                                 runner.spec.l2_bytes) / (1 << 30)
                          for i in plan for w in i.workloads}
        tune_gate(runner.gate, args)
        tune_memory(runner, args.memory_share)
        ahead = None if args.prepare_ahead is None else int(min(args.prepare_ahead, 64))
        if ahead is not None:
            runner.prepare_ahead(ahead)
        if args.memory_age is not None:
            runner.memory.age_s = args.memory_age
        age = args.memory_age
        meta |= {"prepare_ahead": ahead, "memory_age_s": age if age is None or math.isfinite(age) else "inf"}
        meta["gate_policy"] = {"batch": runner.gate.batch, "max_delay_s": runner.gate.max_delay_s,
                               "slice_s": runner.gate.slice_s, "fair": runner.gate.fair,
                               "locks": runner.gate.lock is not None}
        meta |= {"in_flight": runner.in_flight, "spec": runner.spec.id, "memory_share": args.memory_share}
        runner.run(plan)
        complete = len(tally.rows) == meta.get("records_planned")
    else:
        result = run_plan(plan, options, records, tally)
        meta["spec"] = result.spec_id
        complete = True
    summary = tally.write(complete=complete)
    write_intervals(tally.runner.gate if tally.runner is not None else None, tally.intervals)
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
