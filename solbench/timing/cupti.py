"""All-stream device time from CUPTI activity records, through torch.profiler (Kineto): every
kernel, copy and memset a call caused, on every stream of the context, from any thread.

The CUDA timers (solbench.timing.cuda) run their sample loop inside a :class:`DeviceTrace`; each
sample is ``flush; spin; fn(i); device synchronize``, so :func:`split_calls` cuts the timeline
into samples at the flush+spin delimiters and :func:`call_stats` gives each one's span (first
start to last end, all streams). :func:`cross_check` is the stand-alone form, kept for tools.

Each profiled call runs as ``flush; synchronize; spin; fn(i); synchronize``. The synchronisations
make each call's work (on any stream) sit between its own delimiter and the next one on the
device timeline, so kernels are attributed by position, not by name: the flush kernel(s)
followed by the spin kernel mark the start of a call. Their names are learnt once per process
by profiling a flush and a spin alone. Nothing a candidate launches is filtered out, so a
multi-kernel candidate is measured whole and extra library kernels are counted (and listed).

Per call: kernel count, streams, summed kernel time, span (first start to last end, all
streams) and the span of the timed stream alone. Flags:
  * ``side_stream_work``: a call ran kernels on a stream other than the timed one;
  * ``side_stream_tail``: that work ended after the timed stream's last kernel, i.e. after the
    end event could fire (events missed it);
  * ``cupti_mismatch``: the timing's median and the CUPTI span disagree beyond the expected
    bound ``EXPECTED_REL * span + EXPECTED_ABS_S[method]`` (event latency and resolution);
  * ``cupti_unattributed``: the trace could not be split into calls (the check is void).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
EXPECTED_REL = 0.05
# Absolute part of the bound, per method: per-call events carry a device-side launch latency of
# ~2.8 us over the kernel (H200 probe: do_bench-style events vs CUPTI, at 4 KB, 64 MB and 1 GB
# alike); in-graph events sit next to the kernel node.
EXPECTED_ABS_S = {"events": 3.0e-6, "graph": 1.0e-6}
SPIN_CYCLES = 20_000  # ~10 us: long enough to be a clear delimiter, short enough to be cheap

_delimiter_cache: dict[int, tuple[list[str], str]] = {}


def _category(e: Any) -> str | None:
    """An event's device category (kernel, copy, memset), or None for anything else (host events,
    device-side annotations). Torch 2.11's events do not say their activity type: there the
    device type and the name tell (CUDA's copy and memset activities are named Memcpy/Memset)."""
    try:
        cat = e.activity_type()
    except AttributeError:
        cat = None
    if cat is not None:
        return cat if cat in DEVICE_CATS else None
    from torch.autograd import DeviceType

    if e.device_type() != DeviceType.CUDA or getattr(e, "is_user_annotation", lambda: False)():
        return None
    name = e.name()
    return "gpu_memcpy" if name.startswith("Memcpy") else "gpu_memset" if name.startswith("Memset") else "kernel"


def _kineto_device_events(results: Any) -> list[dict]:
    """Device activities straight from Kineto's results (no trace file), by start."""
    out = []
    for e in results.events():
        cat = _category(e)
        if cat is not None:
            out.append({"name": e.name(), "cat": cat, "ts_us": e.start_ns() / 1e3,
                        "dur_us": e.duration_ns() / 1e3, "stream": e.device_resource_id()})
    out.sort(key=lambda e: e["ts_us"])
    return out


class DeviceTrace:
    """Collects the device activities of the whole CUDA context while open (CUDA activity only:
    no CPU op recording, so the host cost per launch stays small).

    Built on ``torch.autograd.profiler.profile`` rather than ``torch.profiler.profile``: the latter
    imports ``torch.distributed`` (and with it dynamo and sympy) on first use, ~5 s per worker on
    the H200 (results/h200/timing_cost_probe_2026-12-01.txt); the Kineto session is the same.
    """

    def __enter__(self) -> DeviceTrace:
        from torch.autograd.profiler import profile

        self._prof = profile(use_device="cuda", use_cpu=False, use_kineto=True)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        torch.cuda.synchronize()
        self._prof.__exit__(*exc)

    def events(self) -> list[dict]:
        try:
            return _kineto_device_events(self._prof.kineto_results)
        except AttributeError:  # a torch whose events lack these accessors: read the trace file
            return _trace_device_events(self._prof)


def _trace_device_events(prof: Any) -> list[dict]:
    """Device activities (kernels, memcpy, memset) from the profiler's Chrome trace, by start."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="solbench_trace_")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            args = e.get("args", {})
            out.append({"name": e.get("name", "?"), "cat": e["cat"], "ts_us": float(e["ts"]),
                        "dur_us": float(e.get("dur", 0.0)), "stream": args.get("stream", e.get("tid"))})
    out.sort(key=lambda e: e["ts_us"])
    return out


def _profile(body: Callable[[], None]) -> list[dict]:
    import torch

    torch.cuda.synchronize()
    with DeviceTrace() as trace:
        body()
    return trace.events()


def kernel_names(body: Callable[[], None]) -> list[str]:
    """Names of the device activities one call of ``body`` causes, in order."""
    return [e["name"] for e in _profile(body)]


def _delimiters(flush: Callable[[], None], key: int) -> tuple[list[str], str]:
    """Names of the flush kernel(s) and of the spin kernel, learnt by profiling them alone."""
    if key not in _delimiter_cache:
        import torch

        flush_names = kernel_names(flush)
        spin = kernel_names(lambda: torch.cuda._sleep(SPIN_CYCLES))
        if not flush_names or len(spin) != 1:
            raise RuntimeError(f"cannot learn delimiter kernels (flush: {flush_names}, spin: {spin})")
        _delimiter_cache[key] = (flush_names, spin[0])
    return _delimiter_cache[key]


def split_calls(events: list[dict], flush_names: list[str], spin_name: str,
                trailing: tuple[str, ...] = (), end_name: str | None = None,
                min_spin_us: float | None = None) -> list[list[dict]]:
    """Split a device timeline into calls: each call starts after a [flush..., spin] delimiter.

    ``trailing``: the names, in order, of the harness's own activities that may run after a call's
    synchronisation (the clock probe); that exact sequence at the very end of a call is dropped.
    ``end_name``: the harness's end marker, two activities of that name back to back, launched after
    each call's device-wide synchronisation and before its own work between calls (output copies,
    edits of inputs): a call is cut at the *last* such pair, so a candidate's own kernels of that
    name, which run before the marker, cannot cut its call short; and a [flush..., spin] whose spin
    is the marker's first is not a call's start (a call whose last kernel has the flush's name, then
    the marker, would look like one). A delimiter whose spin is followed by the whole marker (a call
    that launched nothing) still is.
    ``min_spin_us``: when given, the start delimiter's spin is told from the marker's one-cycle spins
    (and from a candidate's own spin right after it) by its length instead: the harness's start spin
    lasts at least this long.
    """
    names = [e["name"] for e in events]
    k = len(flush_names)
    starts = []
    p = 0
    while p + k < len(names):
        if names[p:p + k] == flush_names and names[p + k] == spin_name and _starts(events, p + k, end_name, min_spin_us):
            starts.append((p, p + k + 1))
            p += k + 1
        else:
            p += 1
    calls = []
    for n, (_, body_start) in enumerate(starts):
        body_end = starts[n + 1][0] if n + 1 < len(starts) else len(events)
        body = events[body_start:body_end]
        ends = [j for j in range(len(body) - 1) if body[j]["name"] == body[j + 1]["name"] == end_name]
        if ends:
            body = body[:ends[-1]]
        k = len(trailing)
        if k and len(body) > k and tuple(e["name"] for e in body[-k:]) == tuple(trailing):
            body = body[:-k]
        calls.append(body)
    return calls


def _starts(events: list[dict], spin: int, end_name: str | None, min_spin_us: float | None) -> bool:
    """Is the spin at this index the harness's start spin (not an end marker's)?"""
    if min_spin_us is not None:
        return events[spin]["dur_us"] >= min_spin_us
    after = [e["name"] for e in events[spin + 1:spin + 3]]
    return not (end_name is not None and after[:1] == [end_name] and after != [end_name, end_name])


def call_stats(call: list[dict], timed_stream: Any) -> dict:
    """One call's device activities: count, summed time, span over all streams, the timed stream's
    span and the tail of other streams' work after it (seconds), and the streams used."""
    if not call:
        return {"kernels": 0, "sum_s": 0.0, "span_s": 0.0, "timed_span_s": 0.0, "tail_s": 0.0, "streams": []}
    start = min(e["ts_us"] for e in call)
    end = max(e["ts_us"] + e["dur_us"] for e in call)
    timed_end = max((e["ts_us"] + e["dur_us"] for e in call if e["stream"] == timed_stream), default=start)
    return {"kernels": len(call), "sum_s": sum(e["dur_us"] for e in call) * 1e-6, "span_s": (end - start) * 1e-6,
            "timed_span_s": (timed_end - start) * 1e-6, "tail_s": max(0.0, end - timed_end) * 1e-6,
            "streams": sorted({str(e["stream"]) for e in call})}


def summarize_calls(calls: list[list[dict]], timed_stream: Any) -> dict:
    """Per-call kernel statistics (seconds) and the stream flags."""
    per_call = [call_stats(call, timed_stream) for call in calls]
    names: dict[str, list[float]] = {}
    for call in calls:
        for e in call:
            names.setdefault(e["name"], []).append(e["dur_us"] * 1e-6)
    streams = sorted({s for c in per_call for s in c["streams"]})
    flags = []
    if any(s != str(timed_stream) for s in streams):
        flags.append("side_stream_work")
        if any(c.get("tail_s", 0.0) > 1e-6 for c in per_call):
            flags.append("side_stream_tail")
    if not calls or any(c["kernels"] == 0 for c in per_call):
        flags.append("cupti_no_kernels")
    med = statistics.median
    return {
        "calls": len(calls),
        "kernels_per_call": [c["kernels"] for c in per_call],
        "streams": streams,
        "timed_stream": str(timed_stream),
        "kernel_sum_s": med(c["sum_s"] for c in per_call) if per_call else None,
        "span_s": med(c["span_s"] for c in per_call) if per_call else None,
        "timed_span_s": med(c["timed_span_s"] for c in per_call) if per_call else None,
        "kernels": {n: {"count": len(v), "median_s": med(v)} for n, v in sorted(names.items())[:20]},
        "flags": flags,
    }


def measure(fn: Callable[[int], Any], n_sets: int, n_calls: int = 10,
            flush: Callable[[], None] | None = None, spin_cycles: int = SPIN_CYCLES) -> dict:
    """Profile `n_calls` calls (rotating sets, flushed, synchronised); CUPTI statistics per call.
    ``spin_cycles``: the spin before each call; one longer than the host's enqueue of the call
    keeps launch gaps out of a multi-kernel call's span."""
    import torch

    if flush is None:
        from solbench.settings import MIN_FLUSH_BYTES

        buf = torch.empty(MIN_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

        def flush() -> None:
            buf.zero_()

    flush_names, spin_name = _delimiters(flush, id(flush.__self__) if hasattr(flush, "__self__") else id(flush))

    def body() -> None:
        for j in range(n_calls):
            flush()
            torch.cuda.synchronize()
            torch.cuda._sleep(spin_cycles)
            fn(j % n_sets)
            torch.cuda.synchronize()

    events = _profile(body)
    calls = split_calls(events, flush_names, spin_name)
    if len(calls) != n_calls:
        return {"available": True, "calls": len(calls), "expected_calls": n_calls, "flags": ["cupti_unattributed"],
                "reason": f"trace split into {len(calls)} calls, expected {n_calls}"}
    spins = [e for e in events if e["name"] == spin_name]
    info = summarize_calls(calls, spins[0]["stream"])
    info["available"] = True
    return info


def cross_check(fn: Callable[[int], Any], n_sets: int, median_s: float, n_calls: int = 10,
                flush: Callable[[], None] | None = None, method: str = "events") -> dict:
    """CUPTI statistics beside a timing's median, with ``cupti_mismatch`` when they disagree."""
    try:
        info = measure(fn, n_sets, n_calls, flush)
    except Exception as err:  # noqa: BLE001 - the cross-check is optional; record why it is missing
        return {"available": False, "reason": f"{type(err).__name__}: {str(err)[:300]}", "flags": []}
    span = info.get("span_s")
    if span:
        bound = EXPECTED_REL * span + EXPECTED_ABS_S.get(method, max(EXPECTED_ABS_S.values()))
        info["events_median_s"] = median_s
        info["rel_err"] = (median_s - span) / span
        info["expected_bound_s"] = bound
        if abs(median_s - span) > bound:
            info["flags"].append("cupti_mismatch")
    return info
