"""How close is solbench's time to the kernel's own? Kernels from ~1 us to ~10 ms, each timed by
solbench's default path (`time_calls`, method auto) and by CUPTI (torch.profiler), plus per-call
events for comparison; and the same candidate timed in two processes.

    python benchmarks/timing_fidelity.py                  # CUDA if present, else a CPU smoke run
    python benchmarks/timing_fidelity.py --device cpu --quick
    python benchmarks/timing_fidelity.py --out results/timing_fidelity_h200_sxm.json
    python benchmarks/timing_fidelity.py --compare --out results/h200/timing_adaptive.json

``--compare --sets``: the engine's set count instead of the timer's settings: each add case timed by
today's timer on as many rotating sets as graph mode wants (inputs over 2x L2, up to 256) and on the
few a flushed timing gets (``solbench.settings.MAX_FLUSHED_TIMING_SETS``), alternately; the
medians must agree within 1%.

``--compare``: each case timed by the former settings (``BEFORE``: 50 ms of warm-up, a 256 MiB flush,
up to 2000 samples) and by today's defaults, alternately (before, after, before, after, ...), in one
process; the medians must agree within 1% while the device time of a timing drops. Each timing's
cost is recorded: samples, warm-up calls and seconds, sampling seconds, flush bytes, wall time.
The medians of the committed previous run (``--previous``) are listed beside them.

Goals (issue 13): error <= 2% for kernels >= 10 us, <= 5% from 2 to 10 us (15% below, issue 5's);
the same memory-bound candidate (>= 50 us) in two processes within 1%.
Truth on CUDA is the CUPTI span of one isolated call (first kernel start to last kernel end, all
streams), each after its own flush and a 1 ms spin, read just before and just after solbench's
timing and averaged (clock drift with power falls on both sides alike).
On the CPU, where there is no CUPTI, the reference is blocked timing (N back-to-back calls / N).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from solbench.settings import MIN_FLUSH_BYTES  # noqa: E402
from solbench.timing import TimingConfig, time_calls  # noqa: E402

Case = tuple[Callable[[int], Any], int, dict]  # fn(i), n_sets, meta (expected output builder etc.)
TWO_PROCESS_CASE = "add_256MiB"
WALL_MIN_S = 100e-6
TRUTH_SPIN_CYCLES = 2_000_000  # ~1 ms at H200 clocks: longer than any case's host enqueue  # host wall-clock reference only where the host's launch path is hidden


def _engine_set_count(input_bytes: int, tensor_bytes: int, device: str, flushed: bool = False) -> int:
    """As many rotating sets as `solbench run` would use (their inputs exceed 2x L2 where memory allows;
    ``flushed``: as a timing whose every call follows an L2 flush gets)."""
    from solbench.engine.cases import available_memory, timing_set_count

    l2 = torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else None
    return timing_set_count(input_bytes, device, l2, available_memory(device), tensor_bytes, flushed)


def _add_case(nbytes: int, device: str, n_sets: int | None = None, flushed: bool = False) -> Case:
    n = max(1, nbytes // 4)
    n_sets = n_sets or _engine_set_count(2 * 4 * n, 3 * 4 * n, device, flushed)
    sets = [(torch.randn(n, device=device), torch.randn(n, device=device)) for _ in range(n_sets)]
    return (lambda i: torch.add(*sets[i])), n_sets, {"bytes": 3 * 4 * n, "expect": lambda i: sets[i][0] + sets[i][1]}


def _gemm_case(m: int, n: int, k: int, device: str, dtype: Any = None, n_sets: int = 2) -> Case:
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
    sets = [(torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype))
            for _ in range(n_sets)]
    return (lambda i: torch.mm(*sets[i])), n_sets, {"flops": 2 * m * n * k}


def _multi_kernel_case(rows: int, cols: int, device: str, n_sets: int = 3) -> Case:
    """Four dependent kernels: add, mul, relu, row sum."""
    sets = [tuple(torch.randn(rows, cols, device=device) for _ in range(3)) for _ in range(n_sets)]

    def fn(i: int) -> Any:
        a, b, c = sets[i]
        return ((a + b) * c).relu_().sum(dim=-1)

    return fn, n_sets, {}


def _side_stream_case(joined: bool, device: str, n: int = 4096, n_sets: int = 2) -> Case:
    """Half the work on a side stream. Joined: the timed stream waits for it (honest). Unjoined:
    it does not, so events miss the side work; CUPTI must flag it."""
    sets = [(torch.randn(n, n, device=device, dtype=torch.bfloat16),
             torch.randn(n, n, device=device, dtype=torch.bfloat16)) for _ in range(n_sets)]
    side = torch.cuda.Stream()

    def fn(i: int) -> Any:
        a, b = sets[i]
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            y = torch.mm(a, b)
        z = torch.mm(b, a)
        if joined:
            cur.wait_stream(side)
            return y + z
        return z

    return fn, n_sets, {"expected_flags": [] if joined else ["side_stream_work"]}


def cuda_cases(quick: bool) -> dict[str, Callable[[], Case]]:
    d = "cuda"
    cases: dict[str, Callable[[], Case]] = {
        "add_4KiB": lambda: _add_case(4 << 10, d),
        "add_1MiB": lambda: _add_case(1 << 20, d),
        "add_16MiB": lambda: _add_case(16 << 20, d),
        "add_64MiB": lambda: _add_case(64 << 20, d),
        "add_256MiB": lambda: _add_case(256 << 20, d),
        "add_1GiB": lambda: _add_case(1 << 30, d, n_sets=2),
        "gemm_bf16_1024": lambda: _gemm_case(1024, 1024, 1024, d),
        "gemm_bf16_4096": lambda: _gemm_case(4096, 4096, 4096, d),
        "gemm_bf16_8192": lambda: _gemm_case(8192, 8192, 8192, d),
        "gemm_bf16_16384": lambda: _gemm_case(16384, 16384, 16384, d),
        "multi_kernel_4096x1024": lambda: _multi_kernel_case(4096, 1024, d),
        "side_stream_joined": lambda: _side_stream_case(True, d),
        "side_stream_unjoined": lambda: _side_stream_case(False, d),
    }
    if quick:
        for k in ("add_1GiB", "gemm_bf16_16384", "add_16MiB"):
            cases.pop(k)
    return cases


def cpu_cases(quick: bool) -> dict[str, Callable[[], Case]]:
    d = "cpu"
    cases: dict[str, Callable[[], Case]] = {
        "add_4KiB": lambda: _add_case(4 << 10, d),
        "add_1MiB": lambda: _add_case(1 << 20, d),
        "add_16MiB": lambda: _add_case(16 << 20, d),
        "gemm_fp32_128": lambda: _gemm_case(128, 128, 128, d),
        "multi_kernel_256x256": lambda: _multi_kernel_case(256, 256, d),
    }
    if quick:
        cases.pop("add_16MiB")
    return cases


def goal_for(t_s: float) -> float:
    if t_s >= 10e-6:
        return 0.02
    if t_s >= 2e-6:  # issue 13: within 5% from 2 to 10 us
        return 0.05
    return 0.15


def _blocked_reference(fn: Callable[[int], Any], n_sets: int, budget_s: float) -> float:
    """CPU reference: median over blocks of back-to-back calls, per call."""
    calls = 1
    while True:  # size a block to ~5 ms
        t0 = time.perf_counter()
        for j in range(calls):
            fn(j % n_sets)
        if time.perf_counter() - t0 > 5e-3 or calls > 1 << 20:
            break
        calls *= 2
    per_call = []
    t_end = time.perf_counter() + budget_s
    while time.perf_counter() < t_end or len(per_call) < 5:
        t0 = time.perf_counter()
        for j in range(calls):
            fn(j % n_sets)
        per_call.append((time.perf_counter() - t0) / calls)
    return sorted(per_call)[len(per_call) // 2]


def wall_reference(fn: Callable[[int], Any], n_sets: int, calls: int = 50, blocks: int = 5) -> float:
    """Device time per call by the host's clock: blocks of back-to-back calls between two
    synchronisations, median block / calls. No flush: fair only when the sets exceed the L2 and a
    call is long enough that the host stays ahead (>= ~100 us). An independent third clock for
    the large cases where events and CUPTI disagree."""
    torch.cuda.synchronize()
    per_call = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for j in range(calls):
            fn(j % n_sets)
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t0) / calls)
    return sorted(per_call)[len(per_call) // 2]


def _truth(fn: Callable[[int], Any], n_sets: int) -> dict:
    """The independent reading: CUPTI spans of 20 isolated calls, each after its own flush (a
    buffer of this script's, not solbench's) and a 1 ms spin, so the whole call is queued before
    it starts (no launch gaps between a multi-kernel call's kernels)."""
    from solbench.timing.cupti import measure

    return measure(fn, n_sets, n_calls=20, spin_cycles=TRUTH_SPIN_CYCLES)


def run_case(name: str, build: Callable[[], Case], device: str, budget_s: float) -> dict:
    fn, n_sets, meta = build()
    if device == "cuda":
        # Bracketed: the truth is read just before and just after solbench's timing and averaged,
        # so a drift of clocks with power and heat (compute-bound kernels) falls on both alike.
        fn(0)
        torch.cuda.synchronize()
        before = _truth(fn, n_sets)
    res, last = time_calls(fn, n_sets, TimingConfig(device=device, budget_s=budget_s))
    row: dict[str, Any] = {"case": name, "method": res.method, "method_reason": res.method_reason,
                           "overhead_subtracted_s": res.overhead_subtracted_s,
                           "median_s": res.median_s, "p10_s": res.p10_s, "p90_s": res.p90_s, "n": res.n,
                           "ci95_rel": res.as_dict()["ci95_rel"], "flags": list(res.flags), "clock": res.clock}
    if "expect" in meta:  # the timed outputs are right (the loop hands back real copies)
        # the last output of every set a timed call ran (events mode need not run every set)
        row["outputs_ok"] = bool(last) and all(torch.allclose(out, meta["expect"](i)) for i, out in last.items())
    if device == "cuda":
        after = _truth(fn, n_sets)
        spans = [t.get("span_s") for t in (before, after)]
        row["truth_before_s"], row["truth_after_s"] = spans
        row["flags"] += [f for t in (before, after) for f in t.get("flags", []) if f not in row["flags"]]
        truth = sum(spans) / 2 if all(spans) else None
        # Both CUDA methods on every case, whatever auto picked: the table then shows where each is
        # accurate, which is the evidence for auto's threshold (graph_threshold_s).
        ev, _ = time_calls(fn, n_sets, TimingConfig(device=device, budget_s=budget_s, method="events"))
        row["events_median_s"] = ev.median_s
        try:
            gr, _ = time_calls(fn, n_sets, TimingConfig(device=device, budget_s=budget_s, method="graph"))
            row["graph_median_s"] = gr.median_s if gr.method == "graph" else None
            row["graph_note"] = gr.method_reason if gr.method != "graph" else ",".join(gr.flags)
        except Exception as err:  # noqa: BLE001 - e.g. out of memory for a batch of big outputs
            row["graph_median_s"], row["graph_note"] = None, f"{type(err).__name__}: {str(err)[:200]}"
        torch.cuda.empty_cache()
        row["cupti"] = before
        if (truth or 0) >= WALL_MIN_S:
            row["wall_s"] = wall_reference(fn, n_sets, calls=max(5, min(50, int(0.05 / truth))))
        expected_flags = meta.get("expected_flags")
        if expected_flags:
            row["expected_flags"] = expected_flags
            row["pass"] = all(f in row["flags"] for f in expected_flags)
            truth = None  # not a fidelity case: the point is that it gets flagged
    else:
        truth = _blocked_reference(fn, n_sets, budget_s)
        row["reference"] = "blocked"
    row["truth_s"] = truth
    if truth:
        row["error"] = (res.median_s - truth) / truth
        for m in ("events", "graph"):
            t = row.get(f"{m}_median_s")
            row[f"{m}_error"] = (t - truth) / truth if t else None
        if device == "cuda":  # the goals are about GPU kernels; on the CPU the table is informational
            row["goal"] = goal_for(truth)
            row["pass"] = abs(row["error"]) <= row["goal"]
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return row


def two_process_check(device: str, case: str, budget_s: float) -> dict:
    """The same candidate timed in two fresh processes, one after the other."""
    medians = []
    for _ in range(2):
        r = subprocess.run([sys.executable, __file__, "--device", device, "--single", case,
                            "--budget", str(budget_s)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return {"case": case, "error": r.stderr[-2000:]}
        medians.append(json.loads(r.stdout.strip().splitlines()[-1])["median_s"])
    spread = abs(medians[0] - medians[1]) / min(medians)
    return {"case": case, "medians_s": medians, "rel_diff": spread, "goal": 0.01, "pass": spread <= 0.01}


def _fmt(x: float | None, scale: float, unit: str, width: int) -> str:
    return f"{'-':>{width}s}" if x is None else f"{x * scale:{width - len(unit)}.2f}{unit}"


def before_config(device: str, budget_s: float) -> TimingConfig:
    """The settings before the adaptive timing: warm-up 50 ms whatever the calls do, a flush of
    max(2 x L2, 256 MiB), a ceiling of 2000 samples (the CI target and floor were the same)."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else 0
    factor = max(2.0, MIN_FLUSH_BYTES / l2) if l2 else 2.0
    return TimingConfig(device=device, budget_s=budget_s, warmup_s=0.05, warmup_min_s=0.05, max_samples=2000,
                        flush_l2_factor=factor)


def _cost(res: Any, wall_s: float) -> dict:
    """What one timing cost: the figures a record keeps about it."""
    d = res.details
    return {"median_s": res.median_s, "n": res.n, "warmup_calls": res.warmup_calls, "warmup_s": d.get("warmup_s"),
            "sampling_s": d.get("sampling_s"), "flush_bytes": res.flush_bytes, "wall_s": wall_s,
            "stop_reason": res.stop_reason, "ci95_rel": res.as_dict()["ci95_rel"], "traces": d.get("cupti_traces"),
            "flags": list(res.flags)}


def _side(runs: list[dict]) -> dict:
    """Several timings of one setting: the median of their medians, and of each cost."""
    med = lambda key: statistics.median(r[key] for r in runs if r.get(key) is not None)  # noqa: E731
    return {"median_s": med("median_s"), "medians_s": [r["median_s"] for r in runs], "n": med("n"),
            "warmup_calls": med("warmup_calls"), "warmup_s": med("warmup_s"), "sampling_s": med("sampling_s"),
            "wall_s": med("wall_s"), "flush_bytes": runs[0]["flush_bytes"], "runs": runs}


def compare_case(name: str, build: Callable[[], Case], device: str, budget_s: float, repeats: int,
                 flush_l2_factor: float | None = None, build_after: Callable[[], Case] | None = None) -> dict:
    """One case timed alternately by the former settings and today's; medians and costs of both.
    ``build_after``: the after side on a case of its own, both sides by today's timer (``--sets``)."""
    fn, n_sets, meta = build()
    after = TimingConfig(device=device, budget_s=budget_s, **({"flush_l2_factor": flush_l2_factor} if flush_l2_factor else {}))
    fn_after, sets_after, _ = build_after() if build_after is not None else (fn, n_sets, meta)
    sides = {"before": (fn, n_sets, before_config(device, budget_s) if build_after is None else after),
             "after": (fn_after, sets_after, after)}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    fn(0)
    fn_after(0)
    for _ in range(repeats):
        for side, (f, n, config) in sides.items():
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            res, _ = time_calls(f, n, config)
            runs[side].append(_cost(res, time.perf_counter() - t0))
    before, after = _side(runs["before"]), _side(runs["after"])
    rel = (after["median_s"] - before["median_s"]) / before["median_s"]
    row = {"case": name, "before": before, "after": after, "rel_diff": rel, "sets": [n_sets, sets_after],
           "wall_ratio": after["wall_s"] / before["wall_s"] if before["wall_s"] else None}
    if meta.get("expected_flags"):
        row["note"] = "not a fidelity case (flagged)"
    elif device == "cuda":  # the goal is about GPU kernels; on the CPU the table is informational
        row["goal"] = 0.01
        row["pass"] = abs(rel) <= 0.01
    if device == "cuda":
        del fn, meta, fn_after, sides
        torch.cuda.empty_cache()
    return row


def _shown(path: Path | None) -> str | None:
    """A path as the results record it: relative to the repository when under it (no host paths)."""
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def _previous_medians(path: Path | None) -> dict[str, float]:
    if path is None or not path.is_file():
        return {}
    doc = json.loads(path.read_text())
    return {c["case"]: c["median_s"] for c in doc.get("cases", []) if c.get("median_s")}


def print_compare(rows: list[dict], previous: dict[str, float]) -> None:
    print(f"{'case':24s} {'before':>10s} {'after':>10s} {'diff':>7s} {'prev':>10s} {'n b/a':>9s} {'warm b/a':>9s} "
          f"{'warm ms b/a':>12s} {'wall ms b/a':>13s} {'flush MiB b/a':>14s} ok")
    for r in rows:
        b, a = r["before"], r["after"]
        ok = "-" if "pass" not in r else "yes" if r["pass"] else "NO"
        print(f"{r['case']:24s} {_fmt(b['median_s'], 1e6, 'us', 10)} {_fmt(a['median_s'], 1e6, 'us', 10)} "
              f"{r['rel_diff'] * 100:+6.2f}% {_fmt(previous.get(r['case']), 1e6, 'us', 10)} "
              f"{b['n']:>4.0f}/{a['n']:<4.0f} {b['warmup_calls']:>4.0f}/{a['warmup_calls']:<4.0f} "
              f"{b['warmup_s'] * 1e3:>5.1f}/{a['warmup_s'] * 1e3:<6.1f} {b['wall_s'] * 1e3:>6.1f}/{a['wall_s'] * 1e3:<6.1f} "
              f"{b['flush_bytes'] / 2**20:>6.0f}/{a['flush_bytes'] / 2**20:<7.0f} {ok}")


def run_compare(args: argparse.Namespace, cases: dict[str, Callable[[], Case]], budget: float) -> dict:
    """--compare: before/after rows over the cases, written after each case (a time box may cut the run)."""
    previous = _previous_medians(args.previous)
    rows = []
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                           "torch": str(torch.__version__), "budget_s": budget, "repeats": args.repeats,
                           "before_settings": {k: v for k, v in vars(before_config(args.device, budget)).items()
                                               if k in ("warmup_s", "warmup_min_s", "max_samples", "flush_l2_factor")},
                           "after_settings": {k: v for k, v in vars(TimingConfig()).items()
                                              if k in ("warmup_s", "warmup_min_s", "warmup_stable_rel", "min_samples",
                                                       "max_samples", "target_rel_ci", "flush_l2_factor")},
                           "previous": _shown(args.previous), "cases": rows}
    t0 = time.monotonic()
    for name in args.case or list(cases):
        if args.time_box and time.monotonic() - t0 > args.time_box:
            doc["stopped"] = f"time box of {args.time_box:g} s reached before {name}"
            break
        try:
            flushed = _flushed_add(name, args.device) if args.sets else None
            if args.sets and flushed is None:
                continue  # only the add cases take the engine's set count
            rows.append(compare_case(name, cases[name], args.device, budget, args.repeats, args.flush_l2_factor, flushed))
        except Exception as err:  # noqa: BLE001 - report and carry on with the other cases
            rows.append({"case": name, "error": f"{type(err).__name__}: {str(err)[:300]}"})
        for r in rows[-1:]:
            r["previous_median_s"] = previous.get(name)
        _summarize(doc)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    print_compare([r for r in rows if "before" in r], previous)
    print(f"wrote {args.out} ({time.monotonic() - t0:.0f} s): {doc['summary']}")
    return doc


ADD_BYTES = {"add_4KiB": 4 << 10, "add_1MiB": 1 << 20, "add_16MiB": 16 << 20, "add_64MiB": 64 << 20,
             "add_256MiB": 256 << 20}


def _flushed_add(name: str, device: str) -> Callable[[], Case] | None:
    """--sets: the add case on the sets a flushed timing gets, or None for a case the set count does not size."""
    nbytes = ADD_BYTES.get(name)
    return None if nbytes is None else (lambda: _add_case(nbytes, device, flushed=True))


def _summarize(doc: dict) -> None:
    rows = [r for r in doc["cases"] if "before" in r]
    fidelity = [r for r in rows if "pass" in r]
    wall = [r["wall_ratio"] for r in rows if r.get("wall_ratio")]
    doc["summary"] = {"cases": len(rows), "fidelity_cases": len(fidelity), "within_1pct": sum(r["pass"] for r in fidelity),
                      "max_abs_rel_diff": max((abs(r["rel_diff"]) for r in fidelity), default=None),
                      "median_wall_ratio": statistics.median(wall) if wall else None,
                      "before_wall_s": sum(r["before"]["wall_s"] for r in rows),
                      "after_wall_s": sum(r["after"]["wall_s"] for r in rows)}


def print_table(rows: list[dict], device: str) -> None:
    ref = "CUPTI span" if device == "cuda" else "blocked ref"
    print(f"{'case':24s} {'method':7s} {ref:>12s} {'solbench':>12s} {'err':>8s} {'events':>12s} "
          f"{'ev err':>8s} {'graph':>12s} {'gr err':>8s} {'ovh sub':>9s} {'wall':>11s} {'goal':>6s}  ok   flags")
    for r in rows:
        ok = "-" if "pass" not in r else "yes" if r["pass"] else "NO"
        print(f"{r['case']:24s} {r['method']:7s} {_fmt(r.get('truth_s'), 1e6, 'us', 12)} "
              f"{_fmt(r['median_s'], 1e6, 'us', 12)} {_fmt(r.get('error'), 100, '%', 8)} "
              f"{_fmt(r.get('events_median_s'), 1e6, 'us', 12)} {_fmt(r.get('events_error'), 100, '%', 8)} "
              f"{_fmt(r.get('graph_median_s'), 1e6, 'us', 12)} {_fmt(r.get('graph_error'), 100, '%', 8)} "
              f"{_fmt(r.get('overhead_subtracted_s'), 1e9, 'ns', 9)} {_fmt(r.get('wall_s'), 1e6, 'us', 11)} "
              f"{_fmt(r.get('goal'), 100, '%', 6)}  {ok:4s} {','.join(r['flags'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", type=Path, help="JSON output (default results/timing_fidelity_<spec>.json)")
    ap.add_argument("--quick", action="store_true", help="fewer, smaller cases and shorter budgets")
    ap.add_argument("--budget", type=float, default=None, help="timing budget per case, seconds")
    ap.add_argument("--case", action="append", help="run only these cases")
    ap.add_argument("--single", help=argparse.SUPPRESS)  # child of the two-process check
    ap.add_argument("--no-two-process", action="store_true")
    ap.add_argument("--compare", action="store_true", help="the former settings against today's, per case: medians "
                                                           "(within 1%%) and what each timing cost")
    ap.add_argument("--repeats", type=int, default=2, help="--compare: timings per setting and case, alternated")
    ap.add_argument("--previous", type=Path, default=ROOT / "results" / "h200" / "timing_fidelity_2026-12-01_session2.json",
                    help="--compare: a committed fidelity run whose medians are listed beside")
    ap.add_argument("--time-box", type=float, default=0.0, help="--compare: start no case after this many seconds")
    ap.add_argument("--sets", action="store_true", help="--compare: the add cases on graph mode's rotating sets "
                                                        "against a flushed timing's few, by today's timer")
    ap.add_argument("--flush-l2-factor", type=float, default=None, help="--compare: today's settings with this flush "
                                                                        "(x L2) instead of the default")
    args = ap.parse_args(argv)
    # 0.5 s per method and case keeps the full CUDA run near a minute (most cases stop on the CI first).
    budget = args.budget or (0.5 if not args.quick else 0.2 if args.device == "cuda" else 0.05)
    cases = cuda_cases(args.quick) if args.device == "cuda" else cpu_cases(args.quick)
    if args.compare:
        args.out = args.out or ROOT / "results" / f"timing_adaptive_{args.device}.json"
        run_compare(args, cases, budget)
        return 0
    if args.single:
        fn, n_sets, _ = (cases | cuda_cases(False) if args.device == "cuda" else cases)[args.single]()
        res, _ = time_calls(fn, n_sets, TimingConfig(device=args.device, budget_s=budget))
        print(json.dumps({"median_s": res.median_s, "method": res.method, "n": res.n}))
        return 0
    t_start = time.monotonic()
    names = args.case or list(cases)
    rows = []
    for name in names:
        try:
            rows.append(run_case(name, cases[name], args.device, budget))
        except Exception as err:  # noqa: BLE001 - report and carry on with the other cases
            rows.append({"case": name, "method": "-", "median_s": 0.0, "flags": [f"error: {err}"], "pass": False})
    print_table(rows, args.device)
    for r in rows:  # which method the default path chose, and why (the L2 policy for graph mode)
        print(f"  {r['case']}: {r['method']} - {r.get('method_reason', '')}")
    two = None
    if not args.no_two_process:
        two_case = TWO_PROCESS_CASE if args.device == "cuda" else "add_4KiB"
        two = two_process_check(args.device, two_case, budget)
        print(f"two processes, {two_case}: {two}")
    spec_id = args.device
    if args.device == "cuda":
        from solbench.data.hardware import detect_spec

        try:
            spec_id = detect_spec(torch.cuda.get_device_name()).id
        except Exception:  # noqa: BLE001 - unknown GPU: name the file after the device
            spec_id = "cuda"
    out = args.out or ROOT / "results" / f"timing_fidelity_{spec_id}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "torch": str(torch.__version__), "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "budget_s": budget, "quick": args.quick, "cases": rows, "two_process": two}
    out.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    print(f"wrote {out} ({time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
