"""`solbench calibrate`: measure this device's achievable ceilings into a spec file.

CUDA: large GEMMs per dtype (bf16, fp16, tf32, fp32, fp8 through ``torch._scaled_mm``, int8
through ``torch._int_mm``, where supported), each as a *burst* (best of short runs after a
cool-down) and *sustained* (median throughput over several seconds, where power capping shows),
plus HBM copy/read/write bandwidth (a copy counts read + write bytes). CPU: matmul per float
dtype and memory bandwidth (large copy and read), so CPU mode has a real roofline.

The spec written has the datasheet keys (``kind: measured``): ``peak_flops`` are the burst
numbers (a roof is an upper bound of what is achievable), ``memory_bandwidth`` the better of copy
and read (writes of constant data may be compressed, so they only appear in ``measured:``).
``measured:`` says how, when, on what and with which versions; ``based_on`` names the datasheet
spec of this GPU. Scores against it are labelled ``roof: measured`` and never mixed with
datasheet scores.

The launch floor (``launch_floor_s``): the median time solbench's own timer (``solbench.timing``,
the same configuration a run uses) reads for a call that launches a one-element fill, torch's
smallest kernel, in events and graph mode on CUDA, in cpu mode on the CPU. No kernel time read
through that timer goes below it, so SOL is also shown against max(T_ideal, floor).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from solbench._version import __version__
from solbench.data import HardwareSpec, detect_spec, load_spec, spec_from_dict
from solbench.engine.environment import driver_version, package_versions
from solbench.errors import SolbenchError, SpecError
from solbench.settings import CALIBRATE_COOLDOWN_S, CALIBRATE_QUICK_COOLDOWN_S

DEFAULT_OUT_DIR = Path("results") / "calibration"
MIN_PEAK = 1e9  # a GPU GEMM below this is a failed measurement, not a roof
MIN_CPU_PEAK = 1e6  # the least rate a measured spec may hold (see hardware._spec_errors)


class CalibrationError(SolbenchError):
    """Calibration cannot run as asked (no such device, bad output name)."""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "device"


def _versions() -> dict[str, str]:
    import torch

    v = {"solbench": __version__, "python": platform.python_version(), **package_versions(),
         "torch": str(torch.__version__)}
    if torch.version.cuda:
        v["cuda"] = str(torch.version.cuda)
    driver = driver_version()
    if driver:
        v["driver"] = driver
    return v


# ---------------------------------------------------------------------------------------------
# CUDA

def _cuda_time_calls(fn: Callable[[], Any], n: int) -> float:
    """Device seconds for n back-to-back calls, by one event pair."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e-3


def _burst_and_sustained(fn: Callable[[], Any], work: float, sustained_s: float) -> dict:
    """Throughput (work units/s): burst = best of 5 short runs, sustained = median of ~0.1 s chunks."""
    from solbench.timing import nvml_state

    fn()
    one = _cuda_time_calls(fn, 1)
    burst_n = max(1, int(0.01 / max(one, 1e-7)))  # ~10 ms per run: short enough to stay at boost
    burst = max(work * burst_n / _cuda_time_calls(fn, burst_n) for _ in range(5))
    chunk_n = max(1, int(0.1 / max(one, 1e-7)))
    chunks = []
    t_end = time.monotonic() + sustained_s
    while time.monotonic() < t_end or len(chunks) < 3:
        chunks.append(work * chunk_n / _cuda_time_calls(fn, chunk_n))
    chunks.sort()
    return {"burst": burst, "sustained": chunks[len(chunks) // 2], "chunks": len(chunks),
            "nvml_after": nvml_state()}


def _gemm_cases(n: int) -> dict[str, Callable[[], Callable[[], Any]]]:
    """dtype -> factory of a GEMM closure on n x n x n random data (random: zeros run faster)."""
    import torch

    dev = "cuda"

    def mm(dtype: Any) -> Callable[[], Callable[[], Any]]:
        def make() -> Callable[[], Any]:
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            return lambda: torch.mm(a, b)
        return make

    def fp8() -> Callable[[], Any]:
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.tensor(1.0, device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def int8() -> Callable[[], Any]:
        a = torch.randint(-64, 64, (n, n), device=dev, dtype=torch.int8)
        b = torch.randint(-64, 64, (n, n), device=dev, dtype=torch.int8).t()
        torch._int_mm(a, b)
        return lambda: torch._int_mm(a, b)

    return {"bfloat16": mm(torch.bfloat16), "float16": mm(torch.float16), "tf32": mm(torch.float32),
            "float32": mm(torch.float32), "float8_e4m3fn": fp8, "int8": int8}


def _hbm_bandwidth(nbytes: int, run_s: float) -> dict[str, dict]:
    """Copy (read + write bytes), read (a sum) and write (a fill) over `nbytes` buffers."""
    import torch

    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    return {
        "copy": _burst_and_sustained(lambda: dst.copy_(src), 2.0 * nbytes, run_s),
        "read": _burst_and_sustained(lambda: src.sum(), float(nbytes), run_s),
        "write": _burst_and_sustained(lambda: dst.fill_(1.5), float(nbytes), run_s),
    }


def measure_cuda(quick: bool = False, sustained_s: float | None = None, log: Callable[[str], None] = print) -> dict:
    import torch

    from solbench.timing import cooldown, nvml_max_sm_mhz

    if not torch.cuda.is_available():
        raise CalibrationError("--device cuda but no CUDA device is visible: use --device cpu")
    n = 4096 if quick else 8192
    sustained_s = (0.5 if quick else 6.0) if sustained_s is None else sustained_s
    prev_precision = torch.get_float32_matmul_precision()
    gemm: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    try:
        for dtype, make in _gemm_cases(n).items():
            torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
            try:
                fn = make()
                cooldown(CALIBRATE_QUICK_COOLDOWN_S if quick else CALIBRATE_COOLDOWN_S)
                gemm[dtype] = _burst_and_sustained(fn, 2.0 * n ** 3, sustained_s)
                log(f"  {dtype:14s} burst {gemm[dtype]['burst'] / 1e12:8.1f} T/s   "
                    f"sustained {gemm[dtype]['sustained'] / 1e12:8.1f} T/s")
                del fn
            except Exception as err:  # noqa: BLE001 - dtype unsupported on this GPU/torch
                skipped[dtype] = f"{type(err).__name__}: {str(err)[:200]}"
                log(f"  {dtype:14s} skipped ({skipped[dtype]})")
            torch.cuda.empty_cache()
    finally:
        torch.set_float32_matmul_precision(prev_precision)

    nbytes = (512 if quick else 2048) * 2**20
    bw = _hbm_bandwidth(nbytes, 0.3 if quick else 1.0)
    for k, v in bw.items():
        log(f"  HBM {k:10s} burst {v['burst'] / 1e12:8.3f} TB/s")
    torch.cuda.empty_cache()
    floor = measure_launch_floor("cuda", quick, log)
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "device_type": "cuda",
        "gemm": gemm, "gemm_skipped": skipped, "gemm_n": n, "sustained_s": sustained_s,
        "bandwidth": bw, "buffer_bytes": nbytes, "launch_floor": floor,
        "sm_count": int(props.multi_processor_count),
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0) or None,
        "memory_bytes": float(props.total_memory),
        "boost_clock_mhz": nvml_max_sm_mhz(0),
    }


# ---------------------------------------------------------------------------------------------
# Launch floor

def _fill_one(buf: Any) -> None:
    """The empty call: one element written by torch's smallest kernel (a fill), nothing returned."""
    buf.zero_()


def measure_launch_floor(device: str, quick: bool, log: Callable[[str], None] = print) -> dict[str, dict]:
    """Per timing method, what the harness's timer reads for the empty call: median, min, samples."""
    import torch

    from solbench.timing import TimingConfig, drive, timing_plan

    sets = [(torch.zeros(1, dtype=torch.int32, device=device),) for _ in range(4)]
    out: dict[str, dict] = {}
    for method in ("events", "graph") if device == "cuda" else ("cpu",):
        config = TimingConfig(device=device, method=method, budget_s=0.3 if quick else 1.0,
                              warmup_s=0.02 if quick else 0.1)
        try:
            result, _ = drive(timing_plan(sets, config), _fill_one)
        except Exception as err:  # noqa: BLE001 - reported in the spec; the default floor then applies
            out[method] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
            log(f"  launch floor {method:6s} skipped ({out[method]['error']})")
            continue
        out[method] = {"median_s": result.median_s, "min_s": result.min_s, "n": result.n,
                       "timer": (result.cupti or {}).get("timer", result.method), "flags": list(result.flags)}
        log(f"  launch floor {method:6s} {result.median_s * 1e6:8.2f} us (median of {result.n}, min "
            f"{result.min_s * 1e6:.2f} us)")
    return out


# ---------------------------------------------------------------------------------------------
# CPU

def _cpu_best(fn: Callable[[], Any], budget_s: float, min_runs: int = 3) -> float:
    """Best wall time of one call within a time budget."""
    fn()
    best = float("inf")
    t_end = time.perf_counter() + budget_s
    runs = 0
    while runs < min_runs or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _cpu_best_threads(fn: Callable[[], Any], budget_s: float) -> tuple[float, int]:
    """(best time, thread count) over torch's thread count and one thread: on a loaded machine
    OpenMP threads that wait on each other can be 100x slower than one thread, and a ceiling is
    the best the machine does."""
    import torch

    default = torch.get_num_threads()
    best: tuple[float, int] = (float("inf"), default)
    try:
        for threads in sorted({default, 1}, reverse=True):
            torch.set_num_threads(threads)
            best = min(best, (_cpu_best(fn, budget_s), threads))
    finally:
        torch.set_num_threads(default)
    return best


# Matmul sizes tried per dtype (the best rate counts): small ones fit the caches, large ones amortise
# the call; a dtype without a fast path stops growing once a call takes CPU_SLOW_CALL_S.
CPU_GEMM_SIZES = {True: (256, 512, 1024), False: (256, 512, 1024, 2048)}
CPU_SLOW_CALL_S = 0.01
# Copy sizes (bytes): a workload's inputs may sit in a cache, so the memory roof is the best copy at
# any of these sizes, from one that fits L2 to one far beyond any last-level cache.
CPU_COPY_SIZES = {True: (1 << 20, 8 << 20, 64 << 20), False: (1 << 20, 8 << 20, 64 << 20, 512 << 20)}
# Dtypes a CPU can always compute through float32 (an eager op upcasts them): their roof is at least
# the float32 rate, whatever their own matmul does.
CPU_UPCAST_DTYPES = ("tf32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8")


def _cpu_gemm_rate(dtype: Any, quick: bool, budget: float) -> dict:
    """The best matmul rate of one dtype over CPU_GEMM_SIZES: burst FLOP/s, the size and threads."""
    import torch

    best = {"burst": 0.0, "n": 0, "threads": 1}
    for n in CPU_GEMM_SIZES[quick]:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        t, threads = _cpu_best_threads(lambda a=a, b=b: torch.mm(a, b), budget)
        if 2.0 * n ** 3 / t > best["burst"]:
            best = {"burst": 2.0 * n ** 3 / t, "n": n, "threads": threads}
        if t > CPU_SLOW_CALL_S:
            break
    best["sustained"] = best["burst"]
    return best


def _cpu_bandwidth(quick: bool, budget: float) -> dict[str, dict]:
    """Copy (read + write bytes) and read (a sum): the best over CPU_COPY_SIZES, with each size's rate."""
    import torch

    out: dict[str, dict] = {"copy": {"burst": 0.0, "by_size": {}}, "read": {"burst": 0.0, "by_size": {}}}
    for nbytes in CPU_COPY_SIZES[quick]:
        src = torch.rand(nbytes // 4)
        dst = torch.empty_like(src)
        for kind, fn, moved in (("copy", functools.partial(dst.copy_, src), 2.0 * nbytes),
                                ("read", src.sum, float(nbytes))):
            rate = moved / _cpu_best_threads(fn, budget)[0]
            out[kind]["by_size"][nbytes] = rate
            out[kind]["burst"] = max(out[kind]["burst"], rate)
    return out


def _cpu_roof_peaks(gemm: dict[str, dict]) -> tuple[dict[str, float], dict[str, str]]:
    """The roof per dtype and, for each dtype whose own matmul is slower than float32's, why its roof
    is float32's rate: an eager op computes it in float32, so a lower roof would be beaten."""
    fp32 = gemm.get("float32", {}).get("burst", 0.0)
    peaks = {k: v["burst"] for k, v in gemm.items() if v["burst"] > 0}
    notes: dict[str, str] = {}
    for dtype in CPU_UPCAST_DTYPES:
        own = peaks.get(dtype)
        if fp32 and (own is None or own < fp32):
            peaks[dtype] = fp32
            notes[dtype] = (f"no fast path (matmul {own / 1e9:.3g} GFLOP/s)" if own else "no matmul kernel") + \
                ": roof = the float32 rate, which computing in float32 reaches"
    return peaks, notes


def measure_cpu(quick: bool = False, log: Callable[[str], None] = print) -> dict:
    import torch

    budget = 0.1 if quick else 0.5
    gemm: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for name in ("float32", "float64", "bfloat16", "float16"):
        try:
            gemm[name] = _cpu_gemm_rate(getattr(torch, name), quick, budget)
            log(f"  {name:10s} matmul {gemm[name]['burst'] / 1e9:9.1f} GFLOP/s (n={gemm[name]['n']}, "
                f"{gemm[name]['threads']} threads)")
        except Exception as err:  # noqa: BLE001 - dtype without a CPU matmul kernel
            skipped[name] = f"{type(err).__name__}: {str(err)[:200]}"
    bw = _cpu_bandwidth(quick, budget)
    for k, v in bw.items():
        log(f"  memory {k:6s} {v['burst'] / 1e9:9.2f} GB/s (best over {len(v['by_size'])} sizes)")
    floor = measure_launch_floor("cpu", quick, log)
    return {
        "device": _cpu_name(), "device_type": "cpu", "gemm": gemm, "gemm_skipped": skipped,
        "gemm_n": {k: v["n"] for k, v in gemm.items()},
        "bandwidth": bw, "buffer_bytes": max(CPU_COPY_SIZES[quick]), "threads": torch.get_num_threads(),
        "launch_floor": floor, "memory_bytes": float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
    }


# ---------------------------------------------------------------------------------------------
# Spec file

def build_spec(m: dict, spec_id: str, quick: bool) -> dict:
    """A `kind: measured` spec dict from a measurement (accepted by hardware.spec_from_dict)."""
    based_on = None
    if m["device_type"] == "cuda":
        try:
            based_on = detect_spec(m["device"]).id
        except SpecError:
            based_on = None
    cpu = m["device_type"] == "cpu"
    peaks, upcast = _cpu_roof_peaks(m["gemm"]) if cpu else (
        {k: v["burst"] for k, v in m["gemm"].items() if v["burst"] >= MIN_PEAK}, {})
    if not peaks or (cpu and min(peaks.values()) < MIN_CPU_PEAK):
        raise CalibrationError(f"no matmul reached {MIN_PEAK:g} FLOP/s on {m['device']}; nothing to write")
    bw = max(m["bandwidth"]["copy"]["burst"], m["bandwidth"]["read"]["burst"])
    accumulate = {"float64": "float64", "float32": "float32", "tf32": "float32", "bfloat16": "float32",
                  "float16": "float32", "float8_e4m3fn": "float32", "float8_e5m2": "float32", "int8": "int32"}
    measured = {
        "method": ("burst = best of 5 runs of ~10 ms of back-to-back n^3 GEMMs after a cool-down; "
                   "sustained = median of ~0.1 s chunks; bandwidth: copy counts read + write bytes"
                   if m["device_type"] == "cuda" else
                   "best wall time of torch.mm (n^3, the best of several n) and of copies and sums (the best of "
                   "several sizes, cache-resident to beyond the last-level cache), torch's threads or one"),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": m["device"],
        "versions": _versions(),
        "host": socket.gethostname(),
        "quick": quick,
        "gemm_n": m["gemm_n"],
        "buffer_bytes": m["buffer_bytes"],
        "burst_peak_flops": {k: v["burst"] for k, v in m["gemm"].items()},
        "sustained_peak_flops": {k: v["sustained"] for k, v in m["gemm"].items()},
        "bandwidth": {k: v["burst"] for k, v in m["bandwidth"].items()},
        **({"bandwidth_by_size": {k: v["by_size"] for k, v in m["bandwidth"].items()}} if cpu else {}),
        **({"no_fast_path": upcast} if upcast else {}),
        "sustained_bandwidth": {k: v["sustained"] for k, v in m["bandwidth"].items() if "sustained" in v},
        "skipped": m["gemm_skipped"],
    }
    if any("threads" in v for v in m["gemm"].values()):
        measured["gemm_threads"] = {k: v["threads"] for k, v in m["gemm"].items() if "threads" in v}
    for key in ("sustained_s", "threads"):
        if key in m:
            measured[key] = m[key]
    floors = {k: v["median_s"] for k, v in m.get("launch_floor", {}).items() if "median_s" in v}
    if m.get("launch_floor"):
        measured["launch_floor"] = m["launch_floor"]
    if m["device_type"] == "cuda":
        measured["nvml_after"] = {k: v.get("nvml_after") for k, v in m["gemm"].items()}
    spec = {
        "id": spec_id,
        "name": f"{m['device']} (measured)",
        "kind": "measured",
        "vendor": "NVIDIA" if m["device_type"] == "cuda" else (platform.machine() or "cpu"),
        "device_type": m["device_type"],
        "match": [],
        "memory_bandwidth": float(bw),
        "peak_flops": {k: float(v) for k, v in peaks.items()},
        "accumulate": {k: accumulate[k] for k in peaks if k in accumulate},
        "launch_floor_s": floors,
        "measured": measured,
        "based_on": based_on,
        "notes": ("peak_flops are burst numbers; see measured.sustained_peak_flops for the power-capped rates"
                  if m["device_type"] == "cuda" else
                  "CPU ceilings for CPU-mode scoring: 1.0 = as fast as this CPU's best matmul (per dtype; dtypes "
                  "without a fast path at the float32 rate) or its best copy"),
    }
    for key in ("sm_count", "l2_bytes", "memory_bytes", "boost_clock_mhz"):
        if m.get(key):
            spec[key] = m[key]
    return spec


def default_spec_id(m: dict, base: str | None = None, now: _dt.datetime | None = None) -> str:
    """A unique id: ``base`` (the output file's name, else the device's) + this host + the time, so
    two calibrations (another host, another day) never share an id, and records scored against
    different roofs are never ranked together."""
    if base is None and m["device_type"] == "cuda":
        try:
            base = f"{detect_spec(m['device']).id}_measured"
        except SpecError:
            base = f"{slug(m['device'])}_measured"
    stamp = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y%m%dt%H%M%S")
    return f"{slug(base or 'cpu')[:40]}_{slug(socket.gethostname())[:24]}_{stamp}"


def calibrate(device: str = "auto", output: str | Path | None = None, quick: bool = False,
              sustained_s: float | None = None, log: Callable[[str], None] = print) -> tuple[HardwareSpec, Path]:
    """Measure this device and write a measured spec; returns (spec, path)."""
    if device not in ("cuda", "cpu", "auto"):
        raise CalibrationError(f"--device {device!r}: use cuda, cpu or auto")
    if output is not None:
        out = Path(output)
        if out.suffix not in (".yaml", ".yml"):
            raise CalibrationError(f"-o {out}: name it NAME.yaml (the spec's id is NAME, this host and the time)")
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    log(f"calibrating {device} ({'quick' if quick else 'full'})")
    m = measure_cuda(quick, sustained_s, log) if device == "cuda" else measure_cpu(quick, log)
    spec_id = default_spec_id(m, Path(output).stem if output is not None else None)
    out = Path(output) if output is not None else DEFAULT_OUT_DIR / f"{spec_id}.yaml"
    data = build_spec(m, spec_id, quick)
    spec_from_dict(data)  # validate before writing: never leave an unloadable file behind
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Measured by `solbench calibrate` on {m['device']}. Score against it: --gpu path/to/{out.name}\n"
              "# peak_flops: FLOP/s (burst), memory_bandwidth: bytes/s. See `measured:` for how.\n")
    out.write_text(header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False), encoding="utf-8")
    return load_spec(out), out
