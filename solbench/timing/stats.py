"""Statistics of timing samples: robust summaries and a distribution-free CI of the median.

The stopping rule of the timing loops asks "is the median known to within +-x%?". The answer
comes from order statistics: for n samples, the interval [x_(k), x_(n+1-k)] (1-based, sorted)
covers the true median with probability 1 - 2 * P(B <= k - 1), B ~ Binomial(n, 1/2), whatever
the distribution of the samples. We take the largest k whose coverage is still >= 95%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# Exact binomial tails up to this n; above it the normal approximation is accurate to one rank.
_EXACT_MAX_N = 400


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (lo, hi) of the order statistics bounding a `confidence` CI of the median.

    None when n is too small for any such interval (n < 6 at 95%).
    """
    alpha_half = (1.0 - confidence) / 2.0
    if n < 1:
        return None
    if n <= _EXACT_MAX_N:
        # P(B <= j) for B ~ Bin(n, 1/2), accumulated in log space to stay finite for large n.
        log_half_n = -n * math.log(2.0)
        cdf = 0.0
        k = 0  # largest k with P(B <= k-1) <= alpha_half
        for j in range(n):
            cdf += math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + log_half_n)
            if cdf <= alpha_half:
                k = j + 1
            else:
                break
    else:
        z = _normal_quantile(1.0 - alpha_half)
        k = int(math.floor(n / 2.0 - z * math.sqrt(n) / 2.0))
    if k < 1:
        return None
    return k, n + 1 - k


def _normal_quantile(p: float) -> float:
    """Inverse standard normal CDF by bisection on erf (only used for a handful of p values)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def median_ci(samples: list[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    """(low, high) of the distribution-free CI of the median, or None if n is too small."""
    ranks = median_ci_ranks(len(samples), confidence)
    if ranks is None:
        return None
    s = np.sort(np.asarray(samples, dtype=float))
    return float(s[ranks[0] - 1]), float(s[ranks[1] - 1])


def median_ci_rel(samples: list[float] | np.ndarray, confidence: float = 0.95) -> float:
    """Half-width of the median's CI relative to the median (the wider side); inf if unknown."""
    ci = median_ci(samples, confidence)
    if ci is None:
        return math.inf
    med = float(np.median(samples))
    if med <= 0:
        return math.inf
    return max(med - ci[0], ci[1] - med) / med


@dataclass(frozen=True)
class Summary:
    median: float
    p10: float
    p25: float
    p75: float
    p90: float
    iqr: float
    min: float
    max: float
    mean: float
    std: float
    n: int
    ci95_rel: float


def summarize(samples: list[float] | np.ndarray) -> Summary:
    """Robust summary; percentiles use numpy's default (linear) interpolation."""
    a = np.asarray(samples, dtype=float)
    if a.size == 0:
        raise ValueError("no samples to summarize")
    p10, p25, med, p75, p90 = (float(x) for x in np.percentile(a, [10, 25, 50, 75, 90]))
    return Summary(
        median=med,
        p10=p10,
        p25=p25,
        p75=p75,
        p90=p90,
        iqr=p75 - p25,
        min=float(a.min()),
        max=float(a.max()),
        mean=float(a.mean()),
        std=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        n=int(a.size),
        ci95_rel=median_ci_rel(a),
    )


def grid_step(values: list[float] | np.ndarray) -> float:
    """The resolution of a clock as its readings show it: the smallest gap between distinct values
    when every value sits on that grid (at least 3 distinct values), else 0. CUPTI timestamps come
    in 0.25 us steps on the H200, so every span of a 2.5 us kernel is 2.25, 2.5 or 2.75 us."""
    a = np.unique(np.asarray(values, dtype=float))
    if a.size < 3:
        return 0.0
    step = float(np.min(np.diff(a)))
    if step <= 0:
        return 0.0
    off = (a - a[0]) / step
    return step if bool(np.all(np.abs(off - np.round(off)) < 1e-3)) else 0.0


def ci_half_width(samples: list[float] | np.ndarray) -> float:
    """Half-width (the wider side) of the median's 95% CI, in the samples' unit; inf if unknown."""
    ci = median_ci(samples)
    if ci is None:
        return math.inf
    med = float(np.median(samples))
    return max(med - ci[0], ci[1] - med)


def ci_met(samples: list[float] | np.ndarray, target_rel_ci: float, resolution_s: float = 0.0) -> bool:
    """Is the median's 95% CI within +-target_rel_ci of it, or within one tick of the timer
    (``resolution_s``: a median known to one tick is known as well as that timer can tell)?"""
    half = ci_half_width(samples)
    if half == math.inf:
        return False
    med = float(np.median(samples))
    return med > 0 and half <= max(target_rel_ci * med, resolution_s * (1 + 1e-6))  # a tick, up to rounding


class StopRule:
    """Adaptive sample count: at least `min_samples` (the floor), stop when the median's 95% CI is
    within `target_rel_ci` (or one tick of the timer, ``resolution_s``: :func:`ci_met`), when the budget is
    spent, or at `max_samples` (the ceiling).

    Two ways to drive it. Per sample (:meth:`should_stop`): the CI test sorts the samples, so it
    runs on a schedule (every ~2% more samples) rather than after every sample. In chunks
    (:meth:`next_chunk`, :meth:`limit`, :meth:`ci_met`): for samples that are only known once a
    chunk is over (the CUPTI spans of a trace), the CI is tested after each chunk; chunks grow by
    half the samples so far, so the checks cost O(log n) traces.
    """

    def __init__(self, min_samples: int, max_samples: int, target_rel_ci: float, budget_ns: int,
                 resolution_s: float = 0.0):
        self.resolution_s = resolution_s  # the timer's tick; may be learnt while sampling
        self.min_samples = max(1, min_samples)
        self.max_samples = max(self.min_samples, max_samples)
        self.target_rel_ci = target_rel_ci
        self.budget_ns = budget_ns
        self._next_check = self.min_samples
        self.last_ci_rel = math.inf

    def ci_met(self, samples: list[float]) -> bool:
        """The CI test (also records ``last_ci_rel``)."""
        self.last_ci_rel = median_ci_rel(samples)
        return len(samples) >= self.min_samples and ci_met(samples, self.target_rel_ci, self.resolution_s)

    def limit(self, n: int, elapsed_ns: int) -> str | None:
        """The ceiling or the budget reached (never before the floor), or None."""
        if n < self.min_samples:
            return None
        if n >= self.max_samples:
            return "max_samples"
        if elapsed_ns >= self.budget_ns:
            return "budget"
        return None

    def next_chunk(self, n: int) -> int:
        """How many samples to take before the next CI check, with ``n`` taken so far."""
        if n < self.min_samples:
            return self.min_samples - n
        return max(1, min(max(n // 2, self.min_samples // 2), self.max_samples - n))

    def should_stop(self, samples: list[float], elapsed_ns: int) -> str | None:
        """The stop reason, or None to keep sampling."""
        n = len(samples)
        if n < self.min_samples:
            return None
        if n >= self.max_samples:
            return "max_samples"
        if n >= self._next_check:
            self._next_check = n + max(1, n // 50)
            if self.ci_met(samples):
                return "ci_target"
        if elapsed_ns >= self.budget_ns:
            return "budget"
        return None


class WarmupRule:
    """Warm-up by time: every set at least once and at least ``min_calls``; then stop once
    ``min_s`` has passed and the calls have settled (the median of the last ``window`` calls within
    ``stable_rel`` of the median of the ``window`` before, or ``resolution_s``), or at ``max_s``
    whatever the calls do.

    What warm-up is for (lazy initialisation, autotuning, clocks leaving idle) shows as calls that
    are still getting faster; once they are not, more warm-up only costs device time.
    """

    def __init__(self, n_sets: int, min_s: float, max_s: float, stable_rel: float,
                 min_calls: int = 3, window: int = 5, resolution_s: float = 0.0):
        self.resolution_s = resolution_s
        self.min_calls = max(min_calls, n_sets)
        self.max_ns = int(max_s * 1e9)
        self.min_ns = min(int(min_s * 1e9), self.max_ns)  # the ceiling wins: warmup_s=0 is no timed warm-up
        self.stable_rel = stable_rel
        self.window = window

    def settled(self, times: list[float]) -> bool:
        w = self.window
        if len(times) < 2 * w:
            return False
        now, before = float(np.median(times[-w:])), float(np.median(times[-2 * w:-w]))
        tol = max(self.stable_rel * before, self.resolution_s)
        return abs(now - before) <= tol

    def done(self, times: list[float], elapsed_ns: int) -> bool:
        """Whether warm-up is over after these call times, ``elapsed_ns`` into it."""
        if len(times) < self.min_calls:
            return False
        if elapsed_ns >= self.max_ns:
            return True
        return elapsed_ns >= self.min_ns and self.settled(times)
