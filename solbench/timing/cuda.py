"""CUDA timing loops: per-call events behind a spin kernel, and CUDA-graph batches.

Events keep the L2 cold: before every timed call, outside its timed window, a write over
2 x L2 (``buf.zero_()``; 256 MiB when the L2's size is unknown), and every call runs on the next
rotating input set. A candidate that pins data with a persisting-L2 access window is undone by
``cudaCtxResetPersistingL2Cache`` before each sample (best effort; the outcome is recorded).

Events: ``flush; spin; start; fn(i); end; synchronize``. The spin kernel (``torch.cuda._sleep``)
keeps the stream busy while the host enqueues start, the candidate's launches and end, so the
start event fires only once the call is queued: the time is the device's, not Python's. The
spin is sized from the measured host enqueue time and grows if the host falls behind it.

Graph (``solbench.timing.graph``): N back-to-back calls in one graph, ``flush; spin; start; replay; end``,
per call = replay / N; no flush between calls (the L2 policy is in the method reason).

All streams (``TimingConfig.cupti``, on by default): the sample loop runs inside CUPTI traces
of the whole context (solbench.timing.cupti), in chunks: after each chunk the trace is read and the
stop rule tests the CI of the spans themselves. Every sample ends with a device-wide synchronize,
and a sample's time is the span of every kernel, copy and memset between its delimiter and the
next one, on any stream and from any thread. Work a candidate hides on another stream, or delays
past the end event, is counted. The events stay as a cross-check (``result.cupti``).

Events only: the device time of an empty event pair after the same flush and spin is measured
once per timing and subtracted (``overhead_subtracted_s``), since it is in every timed window.

The loops are plans (solbench.timing.timing_plan): they yield each call's arguments and are sent
the output, so the caller makes the call. After each sample's device-wide synchronize, an end
marker is launched before the harness's own work between samples (copies of
outputs, the parent's edits of inputs: solbench.timing.verify), and the trace is cut at it, so
that work is never counted in a sample (two one-cycle spins: solbench.timing.cupti.split_calls).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import statistics
from collections.abc import Callable, Generator, Sequence
from typing import Any

import torch

from solbench.settings import MIN_FLUSH_BYTES
from solbench.timing.config import (
    TimingConfig,
    TimingError,
    TimingResult,
    _perf_counter_ns,
    clone_output,
    make_result,
)
from solbench.timing.cudabind import Event as _Event
from solbench.timing.cudabind import current_stream as _current_stream
from solbench.timing.cudabind import elapsed_ms as _elapsed_ms
from solbench.timing.cudabind import record as _record
from solbench.timing.cudabind import sleep as _sleep
from solbench.timing.cudabind import synchronize as _synchronize
from solbench.timing.cudart import libcudart
from solbench.timing.graph import batch_calls, capture, l2_policy
from solbench.timing.stats import StopRule, WarmupRule, grid_step
from solbench.timing.verify import Verify

Args = Sequence[Any]  # one call's arguments: what the loops yield (see solbench.timing.timing_plan)


SPIN_MIN_S = 10e-6
TICK_MIN_SAMPLES = 20  # spans read before their grid counts as the timer's tick
SPIN_HZ_CYCLES = 200_000  # ~0.1 ms at full clock: enough to convert seconds to spin cycles
SPIN_MAX_S = 5e-3
CLOCK_CHUNK = 16  # events samples between clock snapshots
# Graph time below half the eager estimate *and* this much below it: the captured work differs.
# Eager keeps ~1-2 us of event latency on tiny kernels, so the absolute gap keeps them in graph mode.
GRAPH_EAGER_GAP_S = 5e-6
# Events vs the all-stream CUPTI span beyond this disagree (flag): per-call events carry ~3 us of
# launch latency over the kernels (H200 probe), graph replays about 1 us per replay.
EVENTS_VS_CUPTI_REL = 0.05
EVENTS_VS_CUPTI_ABS_S = 3.0e-6


_CACHE: dict[str, Any] = {}


def _cached(key: str, make: Callable[[], Any]) -> Any:
    """Per-process singletons (compiled probe kernels, the libcudart handle): made once, reused by
    every timing of the worker. A failed make is not cached, so it is retried next time."""
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def l2_bytes_for(config: TimingConfig, device: torch.device) -> int:
    return config.l2_bytes or int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)


def flush_bytes_for(config: TimingConfig, device: torch.device) -> int:
    """``flush_l2_factor`` x the L2 (the run's spec, else the device's); 256 MiB if neither knows it."""
    l2 = l2_bytes_for(config, device)
    return int(config.flush_l2_factor * l2) // 4 * 4 if l2 > 0 else MIN_FLUSH_BYTES


class _PersistingL2Reset:
    """cudaCtxResetPersistingL2Cache through ctypes, checked once; ``status`` says how it went."""

    def __init__(self) -> None:
        self.fn = None
        self.status = "not tried"
        try:
            lib = libcudart()
            lib.cudaFree(None)  # initialise the runtime's context first (else 201 in a fresh process)
            fn = lib.cudaCtxResetPersistingL2Cache
            fn.restype = ctypes.c_int
            rc = fn()
            self.status = "ok" if rc == 0 else f"cudaCtxResetPersistingL2Cache returned {rc}"
            if rc == 0:
                self.fn = fn
        except Exception as err:  # noqa: BLE001 - best effort by design; recorded
            self.status = f"unavailable: {type(err).__name__}: {err}"

    def __call__(self) -> None:
        if self.fn is not None:
            self.fn()


def prewarm(device_index: int) -> None:
    """Build now what a process's first timing builds once: the clock probe (its kernel compiled), the
    GPU's top clock (NVML) and the persisting-L2 reset. Called at a worker's load, outside every timing
    window: the first timing of each worker spent ~0.2 s of its window on them (H200, 2026-12-02:
    ``setup_s`` 0.206 s median, 0.001 s in a worker's later timings). A failure is not cached: the
    timing meets it again and reports it, as before."""
    from solbench.timing.clockprobe import ClockProbe, nvml_max_sm_mhz

    device = torch.device("cuda", device_index)
    for key, make in ((f"probe{device_index}", lambda: ClockProbe(device)),
                      (f"max_mhz{device_index}", lambda: nvml_max_sm_mhz(device_index)),
                      ("l2_reset", _PersistingL2Reset)):
        try:
            _cached(key, make)
        except Exception:  # noqa: BLE001, S112 - the timing reports it where it matters
            continue


def prime_trace(config: TimingConfig) -> None:
    """Build now what the all-stream timer's first timing in a process builds once: CUPTI's start (a process's
    first Kineto trace took ~0.14 s, its later ones 2-5 ms: H200, 2026-12-03, ``scripts/lock_probe.py``) and
    the delimiter kernels' names (traces of their own, keyed by the flush size: ``config`` is the timing's).
    Called before a worker's first timing window, outside it: each worker's first window took 0.33 s against
    0.19 s for the later ones (median, H200 call 24). Not at load, as :func:`prewarm` is: a process CUPTI has
    traced can no longer be locked by the driver, and the rounds before the first timing may compile."""
    if config.device == "cpu" or not config.cupti or not torch.cuda.is_available():
        return
    _Setup(config).learn_delimiters()


class _Setup:
    """What both loops share: the stream, flush buffer, spin calibration, L2 reset, clock probe."""

    def __init__(self, config: TimingConfig):
        self.config = config
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.stream = _current_stream(self.device)
        self.l2_bytes = l2_bytes_for(config, self.device)
        self.flush_bytes = flush_bytes_for(config, self.device)
        self.empty_window_s = 0.0
        self._flush_buf = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=self.device)
        self.l2_reset = _cached("l2_reset", _PersistingL2Reset) if config.reset_persisting_l2 else None
        self.flags: list[str] = []
        self.details: dict[str, Any] = {
            "flush_bytes": self.flush_bytes,
            "persisting_l2_reset": self.l2_reset.status if self.l2_reset else "off",
        }
        self.spin_hz = self._measure_spin_hz()
        self.spin_s = 50e-6
        self.probe = None
        self.clock0 = _perf_counter_ns()
        if config.clock_probe:
            try:
                from solbench.timing.clockprobe import ClockProbe, nvml_max_sm_mhz

                self.probe = _cached(f"probe{self.device.index}", lambda: ClockProbe(self.device))
                self.max_sm_mhz = _cached(f"max_mhz{self.device.index}", lambda: nvml_max_sm_mhz(self.device.index or 0))
                self.details["clock_probe_backend"] = self.probe.backend
            except Exception as err:  # noqa: BLE001 - no probe: timing still valid, clocks unknown
                self.details["clock_probe_error"] = f"{type(err).__name__}: {err}"

    def learn_delimiters(self) -> None:
        """Names of the harness's own kernels around each sample (flush, spin, clock probe), learnt
        once per process by tracing each alone, so the trace can be cut into samples."""
        from solbench.timing.cupti import kernel_names

        key = f"delimiters{self.device.index}:{self.flush_bytes}"
        probe = self.probe.snapshot if self.probe is not None else None
        self.delimiters = _cached(key, lambda: (kernel_names(self.flush), kernel_names(self.spin),
                                                tuple(kernel_names(probe)) if probe else ()))

    def traced(self) -> Any:
        """A CUPTI trace of the whole context around a sample loop, or nothing (events only)."""
        if not self.config.cupti:
            return contextlib.nullcontext(None)
        from solbench.timing.cupti import DeviceTrace

        return DeviceTrace()

    def all_stream_stats(self, trace: Any, n: int) -> list[dict] | None:
        """Per-sample statistics of every stream's work, from the trace; None (and a flag) when
        the trace cannot be cut into exactly the ``n`` samples that were timed."""
        if trace is None:
            return None
        from solbench.timing.cupti import call_stats, split_calls

        flush, spin, trailing = self.delimiters
        events = trace.events()
        spin_name = spin[0] if len(spin) == 1 else "?"
        calls = split_calls(events, flush, spin_name, trailing, end_name=spin_name, min_spin_us=0.5 * SPIN_MIN_S * 1e6)
        if len(calls) != n:
            self.flags.append("cupti_unattributed")
            self.details["cupti_error"] = f"trace cut into {len(calls)} samples, {n} were timed"
            return None
        timed = next(e["stream"] for e in events if e["name"] == spin[0])
        return [call_stats(c, timed) for c in calls]

    def _measure_spin_hz(self) -> float:
        """Cycles per second of torch's spin kernel right now (to convert seconds to cycles)."""
        s, e = _Event(enable_timing=True), _Event(enable_timing=True)
        cycles = SPIN_HZ_CYCLES
        best = math.inf
        for _ in range(3):
            _record(s, self.stream)
            _sleep(cycles)
            _record(e, self.stream)
            _synchronize()
            best = min(best, _elapsed_ms(s, e) * 1e-3)
        return cycles / best

    def measure_empty_window(self, n: int = 15) -> float:
        """Median device time of an event pair around nothing, in the same state as a sample
        (flushed, after the spin): the timer's own cost inside every timed window."""
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        vals = []
        for _ in range(n):
            self.pre_sample()
            self.spin()
            _record(start, self.stream)
            _record(end, self.stream)
            _synchronize()
            vals.append(_elapsed_ms(start, end) * 1e-3)
        self.empty_window_s = sorted(vals)[n // 2]
        self.details["empty_window_s"] = self.empty_window_s
        return self.empty_window_s

    def flush(self) -> None:
        self._flush_buf.zero_()

    def pre_sample(self) -> None:
        if self.l2_reset is not None:
            self.l2_reset()
        self.flush()

    def spin(self) -> None:
        _sleep(max(1, int(self.spin_s * self.spin_hz)))

    def end_sample(self) -> None:
        """After a sample's device-wide synchronize: the marker the trace is cut at (two one-cycle
        spins), so the harness's work before the next sample (output copies, edits) is not counted."""
        if self.config.cupti:
            _sleep(1)
            _sleep(1)

    def fit_spin(self, host_enqueue_s: list[float]) -> None:
        """Spin long enough to cover the host's enqueue time, with a 2x margin."""
        if host_enqueue_s:
            worst = sorted(host_enqueue_s)[int(0.9 * (len(host_enqueue_s) - 1))]
            self.spin_s = min(SPIN_MAX_S, max(SPIN_MIN_S, 2.0 * worst))


def _events_sample(st: _Setup, args: Args, start: Any, end: Any) -> Generator[Args, Any, tuple[float, float, Any]]:
    """One timed call: (device seconds, host enqueue seconds, output)."""
    st.pre_sample()
    st.spin()
    h0 = _perf_counter_ns()
    _record(start, st.stream)
    out = yield args
    _record(end, st.stream)
    h1 = _perf_counter_ns()
    _synchronize()
    return _elapsed_ms(start, end) * 1e-3, (h1 - h0) * 1e-9, out


def _warmup(st: _Setup, sets: Sequence[Args]) -> Generator[Args, Any, tuple[int, float]]:
    """Warm up by time with real timed calls (solbench.timing.stats.WarmupRule: every set once, at
    least ``warmup_min_s``, then until the calls settle, at most ``warmup_s``); returns (calls,
    first estimate of one call in s)."""
    n_sets = len(sets)
    cfg = st.config
    rule = WarmupRule(n_sets, cfg.warmup_min_s, cfg.warmup_s, cfg.warmup_stable_rel, min_calls=3)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    times: list[float] = []
    hosts: list[float] = []
    t0 = _perf_counter_ns()
    while not rule.done(times, _perf_counter_ns() - t0):
        t, h, _ = yield from _events_sample(st, sets[len(times) % n_sets], start, end)
        times.append(t)
        hosts.append(h)
        st.fit_spin(hosts[-20:])
    st.spin_hz = st._measure_spin_hz()  # clocks are up now
    st.details["warmup_s"] = (_perf_counter_ns() - t0) * 1e-9
    recent = sorted(times[-9:])  # the median of the latest calls: warm, and robust to a stray one
    return len(times), recent[len(recent) // 2]


class _ClockChunks:
    def __init__(self, st: _Setup):
        self.st = st
        self.snaps: list[Any] = []
        self.counts: list[int] = []
        self._n = 0

    def mark(self, n_samples_so_far: int) -> None:
        if self.st.probe is None:
            return
        if self.snaps:
            self.counts.append(n_samples_so_far - self._n)
        self._n = n_samples_so_far
        self.snaps.append(self.st.probe.snapshot())

    def summary(self, median_s: float) -> tuple[dict | None, list[str]]:
        if self.st.probe is None:
            return None, []
        from solbench.timing.clockprobe import summarize_chunks

        mhz = [self.st.probe.rate_mhz(a, b) for a, b in zip(self.snaps, self.snaps[1:], strict=False)]
        info, flags = summarize_chunks(mhz, self.counts, self.st.max_sm_mhz, median_s)
        info["backend"] = self.st.probe.backend
        return info, flags


class _EventsRun:
    """The state of one events sample loop: samples, host enqueue times, last outputs, clocks."""

    def __init__(self, st: _Setup, sets: Sequence[Args], verify: Verify):
        self.st, self.sets, self.verify = st, sets, verify
        self.start, self.end = _Event(enable_timing=True), _Event(enable_timing=True)
        self.samples: list[float] = []
        self.hosts: list[float] = []
        self.exposed = 0
        self.last: dict[int, Any] = {}
        self.clocks = _ClockChunks(st)
        self.clocks.mark(0)

    def sample(self) -> Generator[Args, Any, None]:
        """One timed call, the parent's checks around it (outside the window), clocks every chunk."""
        st = self.st
        spin_s = st.spin_s
        i = self.verify.before()  # the parent's edits, before the flush: outside the window, out of L2
        t, h, out = yield from _events_sample(st, self.sets[i], self.start, self.end)
        st.end_sample()
        self.samples.append(t)
        self.hosts.append(h)
        if h > spin_s:  # the host was still enqueueing when the spin ended: a gap may be timed
            self.exposed += 1
            st.fit_spin(self.hosts[-20:])
        self.last[i] = clone_output(out)
        self.verify.after(out)
        if len(self.samples) % CLOCK_CHUNK == 0:
            self.clocks.mark(len(self.samples))

    def until(self, stop: Callable[[], str | None]) -> Generator[Args, Any, str]:
        """Samples until ``stop()`` gives a reason (tested after each sample); returns it."""
        while True:
            yield from self.sample()
            reason = stop()
            if reason:
                return reason

    def finish(self) -> None:
        st, n = self.st, len(self.samples)
        if n % CLOCK_CHUNK:
            self.clocks.mark(n)
        _synchronize()
        st.details.update(spin_s=st.spin_s, spin_hz=st.spin_hz, host_enqueue_median_s=sorted(self.hosts)[n // 2],
                          launch_gap_exposed=self.exposed / n)
        if self.exposed / n > 0.1:
            st.flags.append("launch_gap_exposed")
        st.details["_clocks"] = self.clocks


def _events_loop(st: _Setup, sets: Sequence[Args],
                 verify: Verify) -> Generator[Args, Any, tuple[list[float], dict[int, Any], str]]:
    cfg = st.config
    rule = StopRule(cfg.min_samples, cfg.max_samples, cfg.target_rel_ci, int(cfg.budget_s * 1e9))
    run = _EventsRun(st, sets, verify)
    t0 = _perf_counter_ns()
    reason, stats = None, None
    if cfg.cupti:
        reason, stats = yield from _traced_chunks(st, run, rule, t0)
    if reason is None:  # events only (or the trace could not be cut): the stop rule on event times
        reason = yield from run.until(lambda: rule.should_stop(run.samples, _perf_counter_ns() - t0))
    st.details["_all_streams"] = stats
    st.details["sampling_s"] = (_perf_counter_ns() - t0) * 1e-9
    run.finish()
    return run.samples, run.last, reason


def _traced_chunks(st: _Setup, run: _EventsRun, rule: StopRule,
                   t0: int) -> Generator[Args, Any, tuple[str | None, list[dict] | None]]:
    """Samples in chunks, each inside its own CUPTI trace; after each chunk the stop rule tests the
    CI of every stream's spans so far (the samples the result reports). The first chunk lasts until
    the events' own CI meets the target: a trace's start, stop and reading cost about the same
    whatever its length (``details.trace_s``: 5-45 ms a timing on the H200, 2026-12-02), a sample
    microseconds. Later chunks, where the spans' CI fell short, follow :meth:`StopRule.next_chunk`.
    Returns (stop reason, the per-sample span statistics); (None, None)
    when a trace could not be cut into its samples (the caller goes on by events; the flag is set)."""
    stats: list[dict] = []
    traces = 0
    while True:
        n0 = len(run.samples)
        end = n0 + rule.next_chunk(n0)

        def stop(end: int = end, first: bool = not traces) -> str | None:
            n = len(run.samples)
            if first:  # the first chunk: the events' CI decides (the spans' is checked after it)
                reason = rule.should_stop(run.samples, _perf_counter_ns() - t0)
                return "chunk" if reason == "ci_target" else reason
            return rule.limit(n, _perf_counter_ns() - t0) or ("chunk" if n >= end else None)

        t_in = _perf_counter_ns()
        with st.traced() as trace:
            t_on = _perf_counter_ns()
            reason = yield from run.until(stop)
            t_off = _perf_counter_ns()
        traces += 1
        st.details["cupti_traces"] = traces
        chunk = st.all_stream_stats(trace, len(run.samples) - n0)
        st.details["trace_s"] = st.details.get("trace_s", 0.0) + (t_on - t_in + _perf_counter_ns() - t_off) * 1e-9
        if chunk is None:
            return (None if reason == "chunk" else reason), None
        stats += chunk
        if reason != "chunk":
            return reason, stats
        spans = [c["span_s"] for c in stats]
        # The spans' tick (CUPTI spans come in 0.25 us steps on the H200): a median known to one
        # tick is known as well as this timer can tell (solbench.timing.stats.ci_met). Read from
        # enough spans that three values on a coarser grid by chance are not taken for it.
        rule.resolution_s = st.details["span_tick_s"] = grid_step(spans) if len(spans) >= TICK_MIN_SAMPLES else 0.0
        met = rule.ci_met(spans)
        st.details.setdefault("ci_checks", []).append([len(stats), rule.last_ci_rel])
        if met:
            return "ci_target", stats


def _graph_loop(st: _Setup, sets: Sequence[Args], est_s: float,
                verify: Verify) -> Generator[Args, Any, tuple[list[float], dict[int, Any], str, Any, dict[int, Any]]]:
    """Per-call samples from whole replays of a batch of back-to-back calls (see solbench.timing.graph);
    also the graph and its static outputs per set (for the refresh replay)."""
    calls = batch_calls(est_s, len(sets))
    graph, outs = yield from capture(sets, calls, st.device, st.stream)
    graph.replay()  # the first launch uploads the graph; not timed
    _synchronize()
    with st.traced() as trace:
        samples, reason = _graph_replays(st, graph, outs, verify)
    st.details["_all_streams"] = st.all_stream_stats(trace, len(samples))
    # Outputs of the last replay are the graph's static buffers: copy the last one of each set.
    last = {i: clone_output(out) for i, out in outs.items()}
    _synchronize()
    st.details.update(graph_calls_per_replay=calls, graph_replays=len(samples),
                      graph_replay_median_s=sorted(samples)[len(samples) // 2])
    return samples, last, reason, graph, outs


def _graph_refresh(st: _Setup, graph: Any, outs: dict[int, Any], verify: Verify) -> None:
    """The refresh check's run in graph mode: new data in place, one more replay, its output kept."""
    k = verify.refresh()
    if k is None:
        return
    st.pre_sample()
    st.spin()
    graph.replay()
    _synchronize()
    verify.keep_refresh(outs[k])
    _synchronize()


def _graph_replays(st: _Setup, graph: Any, outs: dict[int, Any], verify: Verify) -> tuple[list[float], str]:
    """Timed replays until the stop rule says enough: (replay times in s, stop reason). Between
    replays, the parent's edits are written into the sets (the graph reads the same addresses)."""
    cfg = st.config
    rule = StopRule(cfg.min_samples, cfg.max_samples, cfg.target_rel_ci, int(cfg.budget_s * 1e9))
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    samples: list[float] = []
    hosts: list[float] = []
    clocks = _ClockChunks(st)
    clocks.mark(0)
    t0 = _perf_counter_ns()
    while True:
        i = verify.before()  # the parent's edits, before the flush
        st.pre_sample()  # flush before the replay (its first calls start cold), as events do
        st.spin()  # covers the host's replay launch, so the window holds device time only
        h0 = _perf_counter_ns()
        _record(start, st.stream)
        graph.replay()
        _record(end, st.stream)
        hosts.append((_perf_counter_ns() - h0) * 1e-9)
        _synchronize()
        st.end_sample()
        samples.append(_elapsed_ms(start, end) * 1e-3)  # whole replay; per call below
        verify.after(outs[i])  # the static output of set i after this replay
        st.fit_spin(hosts[-20:])
        clocks.mark(len(samples))
        reason = rule.should_stop(samples, _perf_counter_ns() - t0)  # a relative CI: scale-free
        if reason:
            break
    st.details["_clocks"] = clocks
    return samples, reason


def _choose_method(config: TimingConfig, est_s: float) -> tuple[str, str]:
    if config.method in ("events", "graph"):
        return config.method, "requested"
    if config.cupti:
        # Each sample's time is the CUPTI span of its own kernels, with no event latency in it, so
        # a short call needs no graph batching: every call stays cold-L2 and isolated, and nothing
        # is captured (a candidate cannot act differently under capture).
        return "events", f"all-stream timer: per-call device spans (first estimate {est_s * 1e6:.1f} us)"
    if est_s < config.graph_threshold_s:
        return "graph", f"first event estimate {est_s * 1e6:.1f} us < {config.graph_threshold_s * 1e6:.0f} us"
    return "events", f"first event estimate {est_s * 1e6:.1f} us >= {config.graph_threshold_s * 1e6:.0f} us"


def _graph_samples(st: _Setup, sets: Sequence[Args], est_s: float, reason: str,
                   verify: Verify) -> Generator[Args, Any, tuple[list[float] | None, dict[int, Any] | None, str, str]]:
    """Per-call graph samples (event-timed, overhead off), or None when graph mode does not apply.
    When they apply, the refresh check replays the graph once more on new data."""
    config = st.config
    try:
        replays, last, stop, graph, outs = yield from _graph_loop(st, sets, est_s, verify)
    except Exception as err:  # noqa: BLE001 - uncapturable candidates fall back to events
        rng = getattr(err, "rng_status", "not checked")
        st.details["graph_capture_rng"] = rng
        # The engine should retire this worker: a failed capture can leave state behind
        # (allocator pool, library handles) beyond what is restored here.
        st.flags.append("graph_fallback")
        if not rng.startswith("ok"):
            st.flags.append("worker_poisoned")
        return None, None, "", f"graph capture failed ({type(err).__name__}: {str(err)[:200]})"
    calls = st.details["graph_calls_per_replay"]
    overhead = min(st.empty_window_s if config.subtract_overhead else 0.0, 0.5 * min(replays))
    st.details["_per_call_overhead"] = overhead / calls
    samples = [(r - overhead) / calls for r in replays]
    med = sorted(samples)[len(samples) // 2]
    reason += "; " + l2_policy(len(sets), config.set_bytes, st.l2_bytes)
    # A graph call far faster than the same call eager means the captured work differs from the
    # eager work (e.g. a candidate that skips kernels while capturing), or the inputs sit in a
    # warm L2 that the eager flush empties: either way, not comparable.
    if med < 0.5 * est_s and est_s - med > GRAPH_EAGER_GAP_S:
        st.flags.append("graph_much_faster_than_eager")
        if config.method == "auto":
            return None, None, "", (f"graph median {med * 1e6:.2f} us < half the eager estimate "
                                    f"{est_s * 1e6:.2f} us: not trusted")
    _graph_refresh(st, graph, outs, verify)
    return samples, last, stop, reason


def _events_refresh(st: _Setup, sets: Sequence[Args], verify: Verify) -> Generator[Args, Any, None]:
    """The refresh check's run in events mode: new data in place, one more call like a timed one."""
    k = verify.refresh()
    if k is not None:
        _, _, out = yield from _events_sample(st, sets[k], _Event(enable_timing=True), _Event(enable_timing=True))
        verify.keep_refresh(out)
        _synchronize()


def _events_samples_corrected(st: _Setup, sets: Sequence[Args],
                              verify: Verify) -> Generator[Args, Any, tuple[list[float], dict[int, Any], str]]:
    raw, last, stop = yield from _events_loop(st, sets, verify)
    if st.details.get("_all_streams") is None and st.config.subtract_overhead and "empty_window_s" not in st.details:
        st.measure_empty_window()  # the event times are the result: take the timer's own cost off
    # Never subtract more than half the fastest sample: a bad empty-window reading cannot turn a
    # real call into nothing.
    overhead = min(st.empty_window_s if st.config.subtract_overhead else 0.0, 0.5 * min(raw))
    st.details["_per_call_overhead"] = overhead
    yield from _events_refresh(st, sets, verify)
    return [r - overhead for r in raw], last, stop


def _all_stream_samples(st: _Setup, event_samples: list[float], calls_per_sample: int) -> tuple[list[float], dict | None]:
    """The samples to report: every stream's span per call from CUPTI when the trace was cut into
    the timed samples, else the event samples. The other reading is kept as the cross-check."""
    stats = st.details.pop("_all_streams", None)
    if not stats:
        return event_samples, None
    spans = [c["span_s"] / calls_per_sample for c in stats]
    med = statistics.median
    ev, cu = med(event_samples), med(spans)
    info = {"timer": "cupti_all_streams", "events_median_s": ev, "span_median_s": cu, "rel_err": (ev - cu) / cu if cu else None,
            "kernels_per_sample": med(c["kernels"] for c in stats), "streams": sorted({s for c in stats for s in c["streams"]}),
            "timed_span_median_s": med(c["timed_span_s"] for c in stats) / calls_per_sample,
            "tail_median_s": med(c["tail_s"] for c in stats) / calls_per_sample}
    if len(info["streams"]) > 1:
        st.flags.append("side_stream_work")
        if info["tail_median_s"] > 1e-6:
            st.flags.append("side_stream_tail")  # the end event fired before this work ended
    if abs(ev - cu) > EVENTS_VS_CUPTI_REL * cu + EVENTS_VS_CUPTI_ABS_S:
        st.flags.append("events_cupti_mismatch")
    return spans, info


def time_cuda(sets: Sequence[Args], config: TimingConfig,
              verify: Verify) -> Generator[Args, Any, tuple[TimingResult, dict[int, Any]]]:
    if not torch.cuda.is_available():
        raise TimingError("timing device 'cuda' but no CUDA device is visible: use --device cpu")
    t0 = _perf_counter_ns()
    st = _Setup(config)
    st.details["setup_s"] = (_perf_counter_ns() - t0) * 1e-9
    warm_calls, est_s = yield from _warmup(st, sets)
    st.details["events_estimate_s"] = est_s
    if config.cupti:
        st.learn_delimiters()

    method, reason = _choose_method(config, est_s)
    if method == "graph" or not config.cupti:  # with the all-stream timer the events need it only if the trace fails
        st.measure_empty_window()
    samples = None
    if method == "graph":
        samples, last, stop, reason = yield from _graph_samples(st, sets, est_s, reason, verify)
    if samples is None:
        method = "events"
        samples, last, stop = yield from _events_samples_corrected(st, sets, verify)
    calls = st.details["graph_calls_per_replay"] if method == "graph" else 1
    samples, cupti = _all_stream_samples(st, samples, calls)
    overhead = 0.0 if cupti else st.details.pop("_per_call_overhead", 0.0)
    st.details.pop("_per_call_overhead", None)
    clocks = st.details.pop("_clocks")
    result = make_result(samples, method=method, method_reason=reason, flush_bytes=st.flush_bytes,
                         warmup_calls=warm_calls, stop_reason=stop, flags=st.flags, details=st.details,
                         overhead_subtracted_s=overhead, cupti=cupti)
    result.clock, clock_flags = clocks.summary(result.median_s)
    result.flags.extend(clock_flags)
    return result, last
