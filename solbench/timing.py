"""Timing a candidate: warm-up by time, adaptive sample count, robust statistics.

Public interface (the engine's worker calls this):

    result, last_outputs = time_calls(fn, n_sets, TimingConfig(device="cuda"))

``fn(i)`` runs the candidate once on rotating input set ``i``; ``last_outputs[i]`` is a copy of
the last output fn(i) returned during timing (taken after synchronisation), so the parent can
re-check the outputs of timed calls.

Methods (``TimingConfig.method``):
  * ``cpu``: ``time.perf_counter_ns`` around each call.
  * ``events``: CUDA events around each call; before it, outside the timed window, an L2 flush
    and a short spin kernel so the start event fires only once the call is fully queued (the
    launch gap is hidden, as nvbench's blocking kernel does).
  * ``graph``: a batch of calls cycling over the sets, captured back to back into one CUDA graph;
    one event pair (after the spin) times each replay; per call = replay / calls. No flush inside
    the graph: the method reason states the L2 policy (cold when the sets exceed 2x L2).
  * CUDA samples have the measured empty-window time (an event pair around nothing, after the same
    flush and spin) taken off; ``overhead_subtracted_s`` says how much (``subtract_overhead``).
  * ``auto``: ``graph`` when one call is short (< 20 us by a first event estimate) and capture
    works, else ``events``; ``cpu`` on the CPU. ``method_reason`` says why.

The timer functions are bound here at import time: the worker imports this module before any
candidate code, so a candidate that patches ``time`` or ``torch.cuda.Event`` later does not
change what we read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ._timing_stats import StopRule, summarize
from .errors import SolbenchError

# Captured at import (see module docstring); the CUDA ones are bound in _timing_cuda, which is
# imported at the bottom of this module.
_perf_counter_ns = time.perf_counter_ns
_monotonic = time.monotonic

METHODS = ("auto", "events", "graph", "cpu")
DEVICES = ("cpu", "cuda")


class TimingError(SolbenchError):
    """The timing configuration is invalid (a user-fixable setting)."""


@dataclass
class TimingConfig:
    device: str = "cpu"  # "cpu" | "cuda"
    budget_s: float = 1.0  # per-workload timing budget (samples stop when it runs out)
    min_samples: int = 10
    max_samples: int = 2000
    target_rel_ci: float = 0.01  # stop when the 95% CI of the median is within +-1%
    warmup_s: float = 0.05  # warm-up by time
    method: str = "auto"  # "auto" | "events" | "graph" | "cpu"
    l2_bytes: int | None = None  # flush size = max(2*l2_bytes, 256 MiB) on CUDA if given
    cupti: bool = False  # also collect the CUPTI cross-check
    # Beyond the engine's contract: knobs with safe defaults.
    graph_threshold_s: float = 20e-6  # auto picks graph below this first-estimate call time
    clock_probe: bool = True  # in-stream %globaltimer/clock64 probe around sample chunks (CUDA)
    reset_persisting_l2: bool = True  # cudaCtxResetPersistingL2Cache before each sample (CUDA)
    # Subtract the measured device time of an empty event pair (same flush and spin) from every
    # sample; the amount is in the result's overhead_subtracted_s (docs/timing.md, Evidence).
    subtract_overhead: bool = True
    set_bytes: int | None = None  # bytes of one input set: graph mode reports its L2 policy from it

    def validate(self) -> None:
        if self.device not in DEVICES:
            raise TimingError(f"timing device {self.device!r}: use one of {', '.join(DEVICES)}")
        if self.method not in METHODS:
            raise TimingError(f"timing method {self.method!r}: use one of {', '.join(METHODS)}")
        if self.device == "cpu" and self.method not in ("auto", "cpu"):
            raise TimingError(f"timing method {self.method!r} needs --device cuda; use 'cpu' or 'auto'")
        if self.device == "cuda" and self.method == "cpu":
            raise TimingError("timing method 'cpu' on a CUDA device: use 'auto', 'events' or 'graph'")
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise TimingError(f"timing samples: need 1 <= min_samples ({self.min_samples}) "
                              f"<= max_samples ({self.max_samples})")
        if self.budget_s <= 0 or self.warmup_s < 0 or self.target_rel_ci <= 0:
            raise TimingError("timing budget_s and target_rel_ci must be > 0 and warmup_s >= 0")


@dataclass
class TimingResult:
    samples_s: list[float]
    median_s: float
    p10_s: float
    p90_s: float
    iqr_s: float
    min_s: float
    mean_s: float
    n: int
    ci95_rel: float
    method: str
    method_reason: str
    flush_bytes: int
    warmup_calls: int
    stop_reason: str
    clock: dict | None = None
    cupti: dict | None = None
    flags: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # method-specific extras (sleep length, graph batch, ...)
    overhead_subtracted_s: float = 0.0  # per call, already taken off every sample (CUDA)

    def as_dict(self) -> dict:
        d = asdict(self)
        # JSON has no inf: an unknown CI (too few samples) is recorded as null.
        if d["ci95_rel"] == float("inf"):
            d["ci95_rel"] = None
        return d


def make_result(samples_s: list[float], *, method: str, method_reason: str, flush_bytes: int,
                warmup_calls: int, stop_reason: str, **extra: Any) -> TimingResult:
    """A TimingResult with the statistics computed from the samples."""
    s = summarize(samples_s)
    return TimingResult(
        samples_s=list(samples_s), median_s=s.median, p10_s=s.p10, p90_s=s.p90, iqr_s=s.iqr,
        min_s=s.min, mean_s=s.mean, n=s.n, ci95_rel=s.ci95_rel, method=method,
        method_reason=method_reason, flush_bytes=flush_bytes, warmup_calls=warmup_calls,
        stop_reason=stop_reason, **extra,
    )


def clone_output(out: Any) -> Any:
    """A copy of a candidate's output that later calls cannot change (tensors cloned, containers
    rebuilt, anything else returned as is)."""
    if hasattr(out, "detach") and hasattr(out, "clone"):
        return out.detach().clone()
    if isinstance(out, tuple):
        return tuple(clone_output(o) for o in out)
    if isinstance(out, list):
        return [clone_output(o) for o in out]
    if isinstance(out, dict):
        return {k: clone_output(v) for k, v in out.items()}
    return out


def _time_cpu(fn: Callable[[int], Any], n_sets: int, config: TimingConfig) -> tuple[TimingResult, dict[int, Any]]:
    clock = _perf_counter_ns
    last: dict[int, Any] = {}
    # Warm-up by time; every set at least once so first-touch costs of each set are paid here.
    warm_calls = 0
    t_end = clock() + int(config.warmup_s * 1e9)
    while warm_calls < n_sets or clock() < t_end:
        fn(warm_calls % n_sets)
        warm_calls += 1

    rule = StopRule(config.min_samples, config.max_samples, config.target_rel_ci, int(config.budget_s * 1e9))
    samples: list[float] = []
    t_start = clock()
    i = 0
    while True:
        t0 = clock()
        out = fn(i)
        t1 = clock()
        samples.append((t1 - t0) * 1e-9)
        last[i] = clone_output(out)  # outside the timed window
        i = (i + 1) % n_sets
        reason = rule.should_stop(samples, clock() - t_start)
        if reason:
            break
    result = make_result(samples, method="cpu", method_reason="device is cpu: perf_counter_ns around each call",
                         flush_bytes=0, warmup_calls=warm_calls, stop_reason=reason)
    return result, last


def time_calls(fn: Callable[[int], Any], n_sets: int, config: TimingConfig) -> tuple[TimingResult, dict[int, Any]]:
    """fn(i) runs the candidate once on rotating input set i; returns (result, last output per set)."""
    config.validate()
    if n_sets < 1:
        raise TimingError(f"n_sets must be >= 1, got {n_sets}")
    if config.device == "cpu":
        return _time_cpu(fn, n_sets, config)
    return _timing_cuda.time_cuda(fn, n_sets, config)


# Imported last (it needs the definitions above) and eagerly, so the CUDA timer functions are
# bound when this module is imported, before any candidate code.
from . import _timing_cuda  # noqa: E402

__all__ = ["TimingConfig", "TimingResult", "TimingError", "time_calls", "clone_output", "make_result"]
