"""Timing settings and results: the config a timing runs under, the result it returns, output copies."""


from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from solbench.errors import SolbenchError
from solbench.settings import (
    BUDGET_S,
    FLUSH_L2_FACTOR,
    GRAPH_THRESHOLD_S,
    MAX_SAMPLES,
    MIN_SAMPLES,
    TARGET_REL_CI,
    WARMUP_MIN_S,
    WARMUP_S,
    WARMUP_STABLE_REL,
)
from solbench.timing.stats import summarize

# Captured at import: the worker imports solbench.timing before any candidate code, so a later
# patch of `time` does not change what is read. The CUDA functions are bound in solbench.timing.cudabind.
_perf_counter_ns = time.perf_counter_ns
_monotonic = time.monotonic

METHODS = ("auto", "events", "graph", "cpu")
DEVICES = ("cpu", "cuda")


class TimingError(SolbenchError):
    """The timing configuration is invalid (a user-fixable setting)."""


@dataclass
class TimingConfig:
    """How one workload is timed. The sample count: at least ``min_samples`` (floor), then until the
    median's 95% CI is within ``target_rel_ci`` (or one tick of the timer), at most ``max_samples``
    (ceiling) and ``budget_s`` of sampling. Warm-up: at least ``warmup_min_s`` and every set once,
    then until the calls settle (``warmup_stable_rel``), at most ``warmup_s``. docs/timing.md."""

    device: str = "cpu"  # "cpu" | "cuda"
    budget_s: float = BUDGET_S  # per-workload timing budget (samples stop when it runs out)
    min_samples: int = MIN_SAMPLES  # floor of the sample count
    max_samples: int = MAX_SAMPLES  # ceiling of the sample count (a median not known to 1% by then: its CI is recorded)
    target_rel_ci: float = TARGET_REL_CI  # stop when the 95% CI of the median is within +-1%
    warmup_s: float = WARMUP_S  # ceiling of the warm-up, seconds (warm-up by time)
    warmup_min_s: float = WARMUP_MIN_S  # floor of the warm-up, seconds
    warmup_stable_rel: float = WARMUP_STABLE_REL  # warm-up is over when the last 5 calls' median is this close to the 5 before
    method: str = "auto"  # "auto" | "events" | "graph" | "cpu"
    l2_bytes: int | None = None  # CUDA: flush = flush_l2_factor x l2_bytes (the device's L2 when None)
    flush_l2_factor: float = FLUSH_L2_FACTOR  # the flush writes this many times the L2's size
    cupti: bool = True  # CUDA: time every stream from CUPTI activity records (events become the cross-check)
    # Beyond the engine's contract: knobs with safe defaults.
    graph_threshold_s: float = GRAPH_THRESHOLD_S  # auto picks graph below this first-estimate call time
    clock_probe: bool = True  # in-stream %globaltimer/clock64 probe around sample chunks (CUDA)
    reset_persisting_l2: bool = True  # cudaCtxResetPersistingL2Cache before each sample (CUDA)
    # Subtract the measured device time of an empty event pair (same flush and spin) from every
    # sample; the amount is in the result's overhead_subtracted_s (docs/timing.md, Evidence).
    subtract_overhead: bool = True
    set_bytes: int | None = None  # bytes of one input set: graph mode reports its L2 policy from it

    @property
    def cold_by_flush(self) -> bool:
        """Every timed call on a GPU follows its own L2 flush, none is batched (events; under the
        all-stream timer 'auto' is events too): a call's cache is cold whatever set it runs on, so the
        sets need not outgrow the L2 (graph mode's back-to-back replays need them to)."""
        return self.device == "cuda" and (self.method == "events" or (self.method == "auto" and self.cupti))

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
        if self.budget_s <= 0 or self.warmup_s < 0 or self.warmup_min_s < 0 or self.target_rel_ci <= 0:
            raise TimingError("timing budget_s and target_rel_ci must be > 0, warmup_s and warmup_min_s >= 0")
        if self.flush_l2_factor < 1:
            raise TimingError(f"timing flush_l2_factor {self.flush_l2_factor}: the flush must cover the L2 (>= 1)")


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


def statistics_of(samples_s: list[float]) -> dict[str, Any]:
    """The result's statistics of these samples (median, p10, p90, IQR, min, mean, n, CI), by field."""
    s = summarize(samples_s)
    return {"median_s": s.median, "p10_s": s.p10, "p90_s": s.p90, "iqr_s": s.iqr, "min_s": s.min, "mean_s": s.mean,
            "n": s.n, "ci95_rel": s.ci95_rel}


def make_result(samples_s: list[float], *, method: str, method_reason: str, flush_bytes: int,
                warmup_calls: int, stop_reason: str, **extra: Any) -> TimingResult:
    """A TimingResult with the statistics computed from the samples."""
    return TimingResult(samples_s=list(samples_s), method=method, method_reason=method_reason, flush_bytes=flush_bytes,
                        warmup_calls=warmup_calls, stop_reason=stop_reason, **statistics_of(samples_s), **extra)


MAX_SAMPLES_IN_REPLY = 1_000_000


def restate(timing: dict[str, Any]) -> dict[str, Any]:
    """A worker's timing reply with every statistic recomputed from its raw ``samples_s``: the parent
    never takes the worker's summary on its word. Raises TimingError (one line) when the samples
    are not a non-empty list of finite, non-negative seconds (zero is a measurement: a call that
    launched no device work in its window; the physics floor and the checks judge it)."""
    samples = timing.get("samples_s")
    if not isinstance(samples, list) or not 0 < len(samples) <= MAX_SAMPLES_IN_REPLY:
        raise TimingError("timing samples_s is not a non-empty list of samples")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < float("inf") for x in samples):
        raise TimingError("timing samples_s holds a value that is not a finite, non-negative time")
    stats = statistics_of([float(x) for x in samples])
    if stats["ci95_rel"] == float("inf"):
        stats["ci95_rel"] = None  # as TimingResult.as_dict records it
    return timing | stats


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
