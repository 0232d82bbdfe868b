"""A fast (~1-2 min) self-check of every CUDA timing path: events, graph, flush, CUPTI, clock
probe, persisting-L2 reset, cool-down, calibrate --quick. Each step runs in its own subprocess (a
failure, or a CUDA state it leaves behind, cannot cascade) and prints PASS or FAIL with the reason
and the traceback of a failure, so one run on the GPU tells everything.

    python benchmarks/gpu_timing_smoke.py [--json OUT.json] [--step N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import torch  # noqa: E402
from timing_fidelity import _add_case, _gemm_case, _side_stream_case  # noqa: E402

from solbench.timing import TimingConfig, time_calls  # noqa: E402

RESULTS: list[dict] = []
BUDGET = 0.2


def step(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def wrap(fn: Callable[[], str]) -> Callable[[], str]:
        def run() -> str:
            t0 = time.monotonic()
            try:
                info = fn()
                RESULTS.append({"step": name, "ok": True, "info": info, "s": time.monotonic() - t0})
                print(f"PASS {name}: {info}  ({time.monotonic() - t0:.1f}s)", flush=True)
            except Exception as err:  # noqa: BLE001 - every step is independent by design
                RESULTS.append({"step": name, "ok": False, "info": f"{type(err).__name__}: {err}",
                                "traceback": traceback.format_exc(), "s": time.monotonic() - t0})
                print(f"FAIL {name}: {type(err).__name__}: {err}", flush=True)
                traceback.print_exc()
            return name
        STEPS.append(run)
        return run
    return wrap


STEPS: list[Callable[[], str]] = []


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


def _outputs_ok(last: dict, meta: dict, n_sets: int) -> bool:
    return all(torch.allclose(last[i], meta["expect"](i)) for i in range(n_sets))


def _time(case: tuple, **cfg: Any) -> tuple[Any, dict]:
    fn, n_sets, _ = case
    return time_calls(fn, n_sets, TimingConfig(device="cuda", budget_s=BUDGET, **cfg))


@step("environment")
def s_env() -> str:
    check(torch.cuda.is_available(), "no CUDA device")
    mods = {}
    for m in ("cupy", "pynvml", "triton"):
        try:
            mods[m] = getattr(__import__(m), "__version__", "ok")
        except Exception as err:  # noqa: BLE001
            mods[m] = f"missing ({err})"
    return f"{torch.cuda.get_device_name()} torch {torch.__version__} cuda {torch.version.cuda} {mods}"


@step("events loop (add 1 MiB): flush, spin, outputs, stats")
def s_events() -> str:
    case = _add_case(1 << 20, "cuda")
    res, last = _time(case, method="events")
    check(res.method == "events", f"method {res.method}")
    check(res.n >= 10 and 0 < res.median_s < 1e-3, f"n={res.n} median={res.median_s}")
    check(res.flush_bytes >= 256 * 2**20, f"flush_bytes {res.flush_bytes}")
    check(_outputs_ok(last, case[2], case[1]), "last outputs differ from a+b")
    d = res.details
    return (f"median {res.median_s * 1e6:.2f} us, n {res.n}, stop {res.stop_reason}, spin {d.get('spin_s', 0) * 1e6:.1f} us,"
            f" host enqueue {d.get('host_enqueue_median_s', 0) * 1e6:.1f} us, gap exposed {d.get('launch_gap_exposed')}, "
            f"l2 reset {d.get('persisting_l2_reset')}, flags {res.flags}")


@step("graph loop (add 4 KiB): batched replay, outputs, below events")
def s_graph() -> str:
    case = _add_case(4 << 10, "cuda")
    res, last = _time(case, method="graph")
    ev, _ = _time(case, method="events")
    check(res.method == "graph", f"method {res.method} ({res.method_reason})")
    check(_outputs_ok(last, case[2], case[1]), "last outputs differ from a+b")
    check(0 < res.median_s < ev.median_s, f"graph {res.median_s} not below events {ev.median_s}")
    d = res.details
    return (f"graph {res.median_s * 1e6:.2f} us ({d.get('graph_calls_per_replay')} calls/replay, {res.n} replays, "
            f"overhead {res.overhead_subtracted_s * 1e9:.1f} ns/call) vs events {ev.median_s * 1e6:.2f} us "
            f"(empty window {ev.overhead_subtracted_s * 1e6:.2f} us off); {res.method_reason}; flags {res.flags}")


@step("auto picks graph for 4 KiB, events for 64 MiB")
def s_auto() -> str:
    small, _ = _time(_add_case(4 << 10, "cuda"))
    big, _ = _time(_add_case(64 << 20, "cuda"))
    check(small.method == "graph", f"4 KiB: {small.method} ({small.method_reason})")
    check(big.method == "events", f"64 MiB: {big.method} ({big.method_reason})")
    return f"4 KiB: {small.method_reason}; 64 MiB: {big.method_reason}"


@step("graph capture failure falls back to events")
def s_fallback() -> str:
    fn0, n_sets, meta = _add_case(1 << 20, "cuda")

    def fn(i: int) -> Any:
        out = fn0(i)
        torch.cuda.synchronize()  # illegal while capturing
        return out

    main = torch.cuda.current_stream()
    res, _ = time_calls(fn, n_sets, TimingConfig(device="cuda", budget_s=BUDGET, method="graph"))
    check(res.method == "events" and "graph_fallback" in res.flags, f"{res.method} {res.flags}")
    check(torch.cuda.current_stream() == main, "the capture stream was left current")
    check("worker_poisoned" not in res.flags, f"rng {res.details.get('graph_capture_rng')}")
    torch.randn(16, device="cuda")  # the default generator is usable again (was: offset increment error)
    return f"{res.method_reason[:120]}; rng {res.details.get('graph_capture_rng')}"


@step("graph that skips work while capturing is flagged")
def s_graph_hack() -> str:
    fn0, n_sets, _ = _add_case(64 << 20, "cuda")
    cache: dict[int, Any] = {}

    def fn(i: int) -> Any:
        if torch.cuda.is_current_stream_capturing() and i in cache:
            return cache[i]
        cache[i] = fn0(i)
        return cache[i]

    res, _ = time_calls(fn, n_sets, TimingConfig(device="cuda", budget_s=BUDGET, method="graph"))
    # Caught either way: flagged (graph not trusted) or, if the empty graph cannot run, events.
    check(bool({"graph_much_faster_than_eager", "graph_fallback"} & set(res.flags)), f"flags {res.flags}, median {res.median_s}")
    return f"flags {res.flags}; median {res.median_s * 1e6:.2f} us vs eager {res.details['events_estimate_s'] * 1e6:.2f} us: flagged"


@step("CUPTI: one kernel per add, agrees with events (64 MiB)")
def s_cupti() -> str:
    case = _add_case(64 << 20, "cuda")
    res, _ = _time(case, cupti=True)
    c = res.cupti or {}
    check(c.get("available"), f"cupti unavailable: {c.get('reason')}")
    check(set(c["kernels_per_call"]) == {1}, f"kernels per call {c['kernels_per_call']}")
    check(not {"side_stream_work", "cupti_mismatch"} & set(res.flags), f"flags {res.flags}")
    return f"events {res.median_s * 1e6:.2f} us, CUPTI span {c['span_s'] * 1e6:.2f} us, rel err {c['rel_err']:+.2%}"


@step("CUPTI flags unjoined side-stream work")
def s_cupti_side() -> str:
    res, _ = _time(_side_stream_case(False, "cuda"), cupti=True)
    check("side_stream_work" in res.flags, f"flags {res.flags}")
    c = res.cupti
    return f"flags {res.flags}; streams {c.get('streams')}; events {res.median_s * 1e6:.1f} us vs span {c['span_s'] * 1e6:.1f} us"


@step("CUPTI: joined side stream is measured whole")
def s_cupti_joined() -> str:
    res, _ = _time(_side_stream_case(True, "cuda"), cupti=True)
    c = res.cupti
    check("cupti_mismatch" not in res.flags, f"events {res.median_s} vs span {c.get('span_s')}")
    return f"flags {res.flags}; events {res.median_s * 1e6:.1f} us vs span {c['span_s'] * 1e6:.1f} us"


def _probe_step(backend: str) -> str:
    from solbench.timing.clockprobe import ClockProbe, nvml_max_sm_mhz

    probe = ClockProbe(backend=backend)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):
        x @ x  # bring the clock up
    spin = probe.spin_mhz(200)
    a = probe.snapshot()
    for _ in range(20):
        x @ x
    b = probe.snapshot()
    torch.cuda.synchronize()
    rate = probe.rate_mhz(a, b)
    mx = nvml_max_sm_mhz(0)
    check(100 < spin < 3000 and rate is not None and 100 < rate < 3000, f"spin {spin} rate {rate}")
    return f"spin {spin:.0f} MHz, snapshots over 20 GEMMs {rate:.0f} MHz, NVML max {mx}"


@step("clock probe (cupy)")
def s_probe_cupy() -> str:
    return _probe_step("cupy")


@step("clock probe (triton)")
def s_probe_triton() -> str:
    return _probe_step("triton")


@step("clock summary in a timing result (bf16 GEMM 4096)")
def s_clock_result() -> str:
    res, _ = _time(_gemm_case(4096, 4096, 4096, "cuda"))
    c = res.clock or {}
    check(c.get("available"), f"clock {c}")
    return (f"{c['sm_mhz_effective']:.0f} MHz effective (chunks {c['chunks_mhz'][:6]}), ratio {c.get('clock_ratio')}, "
            f"backend {c.get('backend')}, flags {res.flags}")


@step("large add (256 MiB): events vs host wall clock vs CUPTI (which clock is off?)")
def s_wall() -> str:
    from timing_fidelity import wall_reference

    from solbench.timing.cupti import measure

    fn, n_sets, _ = _add_case(256 << 20, "cuda")
    ev, _ = _time((fn, n_sets, None), method="events")
    wall = wall_reference(fn, n_sets)
    span = measure(fn, n_sets, n_calls=10).get("span_s") or float("nan")
    check(abs(ev.median_s - wall) / wall < 0.05, f"events {ev.median_s} vs wall {wall}")
    return (f"events {ev.median_s * 1e6:.1f} us, wall {wall * 1e6:.1f} us, CUPTI span {span * 1e6:.1f} us "
            f"(CUPTI vs wall {(span - wall) / wall:+.1%})")


@step("persisting-L2 reset")
def s_l2() -> str:
    from solbench.timing.cuda import _PersistingL2Reset

    r = _PersistingL2Reset()
    check(r.status == "ok", r.status)
    return r.status


@step("cooldown")
def s_cooldown() -> str:
    from solbench.timing.clockprobe import cooldown

    out = cooldown(2.0)
    check(out["available"], f"NVML unavailable: {out}")
    return f"waited {out['waited_s']:.2f}s recovered {out['recovered']} after {out['after']}"


@step("calibrate --quick (cuda)")
def s_calibrate() -> str:
    from solbench.engine.calibrate import calibrate

    with tempfile.TemporaryDirectory() as d:
        spec, path = calibrate("cuda", Path(d) / "smoke_measured.yaml", quick=True, sustained_s=0.2, log=lambda s: None)
        text = path.read_text()
    bf16 = spec.peak_flops.get("bfloat16", 0)
    check(100e12 < bf16 < 1.2 * 989.4e12, f"bf16 {bf16}")
    check(1e12 < spec.memory_bandwidth < 5e12, f"bw {spec.memory_bandwidth}")
    peaks = {k: f"{v / 1e12:.0f}T" for k, v in spec.peak_flops.items()}
    return f"based_on {spec.based_on}; peaks {peaks}; bw {spec.memory_bandwidth / 1e12:.2f} TB/s; {len(text)} chars"


@step("fidelity mini: auto / events / graph vs CUPTI (4 KiB, 64 MiB add, bf16 4096 GEMM)")
def s_fidelity() -> str:
    """Fails only on gross errors (> 10%, or > 3 us): the goals are judged by timing_fidelity.py."""
    from timing_fidelity import run_case

    out, bad = [], []
    for name, build in (("add_4KiB", lambda: _add_case(4 << 10, "cuda")),
                        ("add_64MiB", lambda: _add_case(64 << 20, "cuda")),
                        ("gemm_bf16_4096", lambda: _gemm_case(4096, 4096, 4096, "cuda"))):
        r = run_case(name, build, "cuda", BUDGET)
        errs = {m: r.get(f"{m}_error") for m in ("events", "graph")}
        out.append(f"{name}: CUPTI {r['truth_s'] * 1e6:.2f} us; auto={r['method']} {r['error']:+.2%}; "
                   + ", ".join(f"{m} {e:+.2%}" if e is not None else f"{m} -" for m, e in errs.items()))
        if abs(r["error"]) > 0.10 and abs(r["median_s"] - r["truth_s"]) > 3e-6:
            bad.append(name)
    check(not bad, f"gross error in {bad}: " + "; ".join(out))
    return "; ".join(out)


RESULT_TAG = "@@smoke-result "


def _run_isolated(k: int) -> dict:
    """Step k in a fresh interpreter; its PASS/FAIL lines pass through, its record comes back."""
    try:
        r = subprocess.run([sys.executable, __file__, "--step", str(k)], capture_output=True, text=True, timeout=300)
        out, err, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as exc:
        out, err, rc = str(exc.stdout or ""), str(exc.stderr or ""), "timeout"
    records = [json.loads(line[len(RESULT_TAG):]) for line in out.splitlines() if line.startswith(RESULT_TAG)]
    print("\n".join(line for line in out.splitlines() if not line.startswith(RESULT_TAG)), flush=True)
    if records:
        if not records[0]["ok"]:
            print(err[-3000:], flush=True)
        return records[0]
    print(f"FAIL step {k}: subprocess exit {rc}\n{err[-3000:]}", flush=True)
    return {"step": f"step {k}", "ok": False, "info": f"subprocess exit {rc}", "traceback": err[-3000:]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--step", type=int, help="run only step N (0-based) in this process")
    args = ap.parse_args()
    if args.step is not None:
        STEPS[args.step]()
        print(RESULT_TAG + json.dumps(RESULTS[-1], default=str), flush=True)
        return 0 if RESULTS[-1]["ok"] else 1
    t0 = time.monotonic()
    results = []
    for k in range(len(STEPS)):
        results.append(_run_isolated(k))
        if k == 0 and not results[0]["ok"]:
            break  # no CUDA: nothing else can run
    n_ok = sum(r["ok"] for r in results)
    print(f"\n{n_ok}/{len(results)} passed in {time.monotonic() - t0:.1f}s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0 if n_ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
