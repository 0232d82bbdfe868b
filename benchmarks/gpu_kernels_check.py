"""Tuning loop for the shipped Triton candidates on a GPU (the official numbers come from `solbench run`).

For every candidate below and every workload of its problem: check the output against the
problem's reference (the problem's tolerance), time it with `triton.testing.do_bench` (median; the
L2 is flushed before each rep and several input sets are rotated for small workloads), time the
problem's torch_eager candidate the same way, and report ms, achieved TFLOP/s and TB/s, SOL
against the H200 datasheet spec, and the host time per call (launch overhead; see host_us).
Prints a table; writes JSON to $OUT/kernels_check.json when $OUT is set, else
results/kernels_check.json.

    python3 benchmarks/gpu_kernels_check.py [--problems rmsnorm,rope] [--budget-s 170] [--no-eager]

A problem folder or candidate file that does not exist is skipped with a message. Work stops
starting new workloads once --budget-s is spent (each is then reported as skipped).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROBLEM_ROOT = ROOT / "problems" / "llama3_1_8b"
# Most important first: the fused GEMM epilogues, then the memory-bound kernels.
CANDIDATES = [
    ("attn_o_proj_residual", "triton_gemm_residual.py"),
    ("attn_o_proj_residual", "triton_tma_gemm_residual.py"),
    ("mlp_down_proj_residual", "triton_gemm_residual.py"),
    ("mlp_down_proj_residual", "triton_tma_gemm_residual.py"),
    ("gate_up_swiglu", "triton_gate_up_swiglu.py"),
    ("gate_up_swiglu", "triton_tma_gate_up_swiglu.py"),
    ("rmsnorm", "triton_rmsnorm.py"),
    ("fused_add_rmsnorm", "triton_fused_add_rmsnorm.py"),
    ("swiglu", "triton_swiglu.py"),
    ("rope", "triton_rope.py"),
    ("cross_entropy", "triton_cross_entropy.py"),
    ("embedding", "triton_embedding.py"),
    ("rmsnorm_backward", "triton_rmsnorm_backward.py"),
    ("kv_cache_append", "triton_kv_cache_append.py"),
]
MAX_INPUT_SETS = 8
DEVICE = "cuda"


def as_outputs(result: Any) -> list:
    import torch

    return [result] if isinstance(result, torch.Tensor) else list(result)


def compare(got: Any, want: Any, names: list[str], tol: Any) -> tuple[bool, dict]:
    """The problem's elementwise check |got - want| <= atol + rtol*|want| on every output."""
    import torch

    got_l, want_l = as_outputs(got), as_outputs(want)
    if len(got_l) != len(want_l):
        return False, {"error": f"{len(got_l)} outputs, expected {len(want_l)}"}
    detail: dict[str, Any] = {}
    ok = True
    for name, g, w in zip(names, got_l, want_l, strict=True):
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            shape = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
            detail[name] = f"got {shape} {getattr(g, 'dtype', '')}, want {tuple(w.shape)} {w.dtype}"
            ok = False
            continue
        if not w.dtype.is_floating_point:
            equal = torch.equal(g, w)
            detail[name] = {"exact": equal}
            ok &= equal
            continue
        g64, w64 = g.double(), w.double()
        err = (g64 - w64).abs()
        bad = ~(err <= tol.atol + tol.rtol * w64.abs())  # NaN counts as bad
        ratio = bad.double().mean().item()
        detail[name] = {"max_abs_err": err.nan_to_num(float("inf")).max().item(), "mismatch_ratio": ratio}
        ok &= ratio <= tol.max_mismatch_ratio
    return ok, detail


def bench_ms(fn: Any, input_sets: list[tuple]) -> float:
    """Median ms of fn over rotating input sets (do_bench also flushes L2 before every rep)."""
    from triton.testing import do_bench

    cycle = itertools.cycle(input_sets)
    return float(do_bench(lambda: fn(*next(cycle)), warmup=25, rep=100, return_mode="median"))


def host_us(fn: Any, input_sets: list[tuple], calls: int = 50) -> float:
    """CPU time per call to enqueue fn (Python, autotuner lookup, launch), in microseconds.

    do_bench's L2 flush before each rep (~57 us on an H200) hides host time below that; a
    small workload whose host time is above it is measured as host time, not kernel time.
    """
    import torch

    for i in range(3):
        fn(*input_sets[i % len(input_sets)])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(calls):
        fn(*input_sets[i % len(input_sets)])
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def best_config(module: Any) -> str | None:
    """The config the candidate's autotuner settled on last (for the tuning notes), if it has one."""
    for name in ("_tuned_kernel", "_tuned_partial"):
        tuner = getattr(module, name, None)
        cfg = getattr(tuner, "best_config", None)
        if cfg is not None:
            return str(cfg)
    return None


def _candidate_path(op: str, file: str) -> tuple[Path, Path] | None:
    """The problem folder and candidate file of ``op``/``file``, or None (said on stdout) when either is missing."""
    folder = PROBLEM_ROOT / op
    if not (folder / "problem.yaml").is_file():
        print(f"skip {op}: no problem at {folder.relative_to(ROOT)}")
        return None
    path = folder / "solutions" / file
    if not path.is_file():
        print(f"skip {op}/{file}: candidate not found")
        return None
    return folder, path


def check_candidate(op: str, file: str, spec: Any, eager_cache: dict, deadline: float, with_eager: bool) -> list[dict]:
    import torch

    from solbench import load_problem, workload_point
    from solbench.engine.problem_code import load_generator, load_module, load_reference, make_inputs

    if (found := _candidate_path(op, file)) is None:
        return []
    folder, path = found
    problem = load_problem(folder)
    ref, gen = load_reference(problem), load_generator(problem)
    out_names = list(problem.outputs)
    records = []
    try:
        cand = load_module(path, "cand")
    except Exception as e:  # noqa: BLE001 - report any import failure and go on
        return [{"problem": problem.name, "solution": file, "status": "IMPORT_ERROR", "error": repr(e)}]
    eager_path = folder / "solutions" / "torch_eager.py"
    eager = load_module(eager_path, "eager") if with_eager and eager_path.is_file() else None
    for w in problem.workloads:
        rec: dict[str, Any] = {"problem": problem.name, "workload": w.name, "solution": file}
        records.append(rec)
        if time.monotonic() > deadline:
            rec["status"] = "SKIPPED_BUDGET"
            continue
        axes = problem.resolve_axes(w)
        point = workload_point(problem, w, spec)
        rec.update(flops=point.flops, bytes=point.bytes, bound=point.bound, t_ideal_ms=point.t_ideal_s * 1e3)
        l2_bytes = spec.l2_bytes or 64 * 2**20
        n_sets = max(1, min(MAX_INPUT_SETS, math.ceil(2 * l2_bytes / max(point.bytes, 1))))
        sets = [tuple(make_inputs(problem, axes, seed=s, device=DEVICE, generator_fn=gen).values())
                for s in range(n_sets)]
        try:
            # The reference first, on copies: in-place candidates (kv_cache_append) change their inputs.
            want = ref(*[v.clone() if isinstance(v, torch.Tensor) else v for v in sets[0]])
            t0 = time.monotonic()
            got = cand.run(*sets[0])  # first call compiles and autotunes
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            rec["first_call_s"] = round(time.monotonic() - t0, 2)
            ok, detail = compare(got, want, out_names, problem.tolerance_for(w))
            del got, want
            rec["check"] = detail
            if not ok:
                rec["status"] = "INCORRECT"
                continue
            ms = bench_ms(cand.run, sets)
            rec["host_us"] = host_us(cand.run, sets) if DEVICE == "cuda" else None
        except Exception as e:  # noqa: BLE001 - a failing kernel is a result, not a crash
            rec["status"] = "ERROR"
            rec["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]
            continue
        rec.update(status="PASSED", ms=ms, tflops=point.flops / ms / 1e9, tbps=point.bytes / ms / 1e9,
                   sol=point.t_ideal_s * 1e3 / ms, config=best_config(cand))
        key = (problem.name, w.name)
        if eager is not None and key not in eager_cache:
            try:
                eager_cache[key] = bench_ms(eager.run, sets)
            except Exception as e:  # noqa: BLE001
                eager_cache[key] = None
                print(f"  eager {key} failed: {e!r}")
        if eager_cache.get(key):
            rec["eager_ms"] = eager_cache[key]
            rec["speedup_vs_eager"] = eager_cache[key] / ms
        del sets
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    return records


def print_table(records: list[dict]) -> None:
    head = f"{'problem':<34} {'workload':<18} {'solution':<28} {'status':<8} {'ms':>9} {'eager ms':>9} " \
           f"{'x eager':>7} {'TFLOP/s':>8} {'TB/s':>6} {'SOL':>6} {'host us':>7} bound"
    print(head)
    print("-" * len(head))
    for r in records:
        if r.get("status") != "PASSED":
            print(f"{r['problem']:<34} {r.get('workload', '-'):<18} {r['solution']:<28} {r.get('status', '?'):<8} "
                  f"{r.get('error', '')[:80] or json.dumps(r.get('check', ''))[:80]}")
            continue
        eager = f"{r['eager_ms']:9.4f}" if r.get("eager_ms") else f"{'-':>9}"
        speed = f"{r['speedup_vs_eager']:7.2f}" if r.get("speedup_vs_eager") else f"{'-':>7}"
        print(f"{r['problem']:<34} {r['workload']:<18} {r['solution']:<28} {'PASSED':<8} {r['ms']:9.4f} {eager} "
              f"{speed} {r['tflops']:8.1f} {r['tbps']:6.2f} {r['sol']:6.3f} {r.get('host_us') or 0:7.1f} {r['bound']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="", help="comma-separated op names (default: all)")
    parser.add_argument("--budget-s", type=float, default=170.0, help="stop starting new workloads after this")
    parser.add_argument("--no-eager", action="store_true", help="skip timing the torch_eager candidates")
    args = parser.parse_args(argv)

    import torch
    import triton

    from solbench import load_spec

    if not torch.cuda.is_available():
        print("gpu_kernels_check needs a CUDA device (the CPU path is tests/library/test_triton_kernels.py)")
        return 2
    spec = load_spec("h200_sxm")
    wanted = {p for p in args.problems.split(",") if p}
    start = time.monotonic()
    deadline = start + args.budget_s
    eager_cache: dict = {}
    records: list[dict] = []
    for op, file in CANDIDATES:
        if wanted and op not in wanted:
            continue
        print(f"== {op}/{file} ({time.monotonic() - start:.0f} s)", flush=True)
        records.extend(check_candidate(op, file, spec, eager_cache, deadline, not args.no_eager))
    print()
    print_table(records)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "spec": spec.id, "wall_s": round(time.monotonic() - start, 1)}
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / "kernels_check.json"
    out_file.write_text(json.dumps({"environment": env, "records": records}, indent=1, default=str))
    n_pass = sum(r.get("status") == "PASSED" for r in records)
    print(f"\n{n_pass}/{len(records)} PASSED in {env['wall_s']} s; wrote {out_file}")
    return 0 if n_pass == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
