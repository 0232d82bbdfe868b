"""Is NEW slower than BASE? The time ratio NEW/BASE of two sets of timing samples, its 95% interval,
a p-value, and a verdict ``faster``, ``slower`` or ``same`` with a minimum effect (docs/compare.md).

Each side is a list of *rounds*: the samples of one record each (one run, or one ``--interleave``
round). Two methods, chosen by what the records can support:

* ``samples`` (a side with one record): ratio of the medians of the pooled samples; interval by
  bootstrap (resampling each side's samples, ``n_boot`` times, fixed seed); p from the two-sided
  Mann-Whitney U test on the samples. Sees only the noise within a run.
* ``rounds`` (two records or more on each side): one number per record, the log of its median;
  ratio = exp(mean difference), interval and p from Student's t: paired on the rounds of one
  interleaved run (round i of BASE next to round i of NEW), Welch's otherwise. Sees the drift
  between runs (power, clocks) that the samples of one run cannot show.

Verdict: ``slower`` when p < alpha and ratio >= 1 + min_effect, ``faster`` when p < alpha and
ratio <= 1 - min_effect, else ``same``. scipy is imported on first use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_MIN_EFFECT = 0.02
DEFAULT_ALPHA = 0.05
DEFAULT_BOOTSTRAP = 1000
VERDICTS = ("faster", "slower", "same")


@dataclass(frozen=True)
class Comparison:
    """NEW against BASE: ``ratio`` = NEW time / BASE time (above 1: NEW is slower)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    method: str
    n_base: int
    n_new: int
    rounds_base: int
    rounds_new: int

    def as_dict(self) -> dict:
        return asdict(self)


def clean_samples(values: object) -> np.ndarray:
    """The positive finite numbers of a record's ``samples_s`` (records are untrusted input)."""
    if not isinstance(values, (list, tuple, np.ndarray)):
        return np.empty(0)
    out = np.array([v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)], dtype=float)
    return out[np.isfinite(out) & (out > 0)]


def verdict(ratio: float, p_value: float, min_effect: float = DEFAULT_MIN_EFFECT,
            alpha: float = DEFAULT_ALPHA) -> str:
    """``slower``/``faster`` when significant and at least ``min_effect`` away from 1, else ``same``."""
    if p_value < alpha and ratio >= 1.0 + min_effect:
        return "slower"
    if p_value < alpha and ratio <= 1.0 - min_effect:
        return "faster"
    return "same"


def compare_samples(base: Sequence[Sequence[float]], new: Sequence[Sequence[float]], *,
                    min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = DEFAULT_ALPHA,
                    n_boot: int = DEFAULT_BOOTSTRAP, paired: bool = False, seed: int = 0) -> Comparison:
    """Compare two sides, each a list of rounds of timing samples (see the module docstring).

    ``paired``: round i of ``base`` ran next to round i of ``new`` (one interleaved run).
    Raises ValueError when a side has no usable sample."""
    b = [r for r in (clean_samples(x) for x in base) if r.size]
    n = [r for r in (clean_samples(x) for x in new) if r.size]
    if not b or not n:
        raise ValueError("each side needs at least one positive timing sample")
    if len(b) >= 2 and len(n) >= 2:
        ratio, lo, hi, p = _rounds(b, n, alpha, paired and len(b) == len(n))
        method = "rounds, paired t" if paired and len(b) == len(n) else "rounds, Welch t"
    else:
        ratio, lo, hi, p = _samples(np.concatenate(b), np.concatenate(n), alpha, n_boot, seed)
        method = "samples, Mann-Whitney U"
    return Comparison(ratio, lo, hi, p, verdict(ratio, p, min_effect, alpha), method,
                      int(sum(r.size for r in b)), int(sum(r.size for r in n)), len(b), len(n))


def _samples(b: np.ndarray, n: np.ndarray, alpha: float, n_boot: int, seed: int) -> tuple[float, float, float, float]:
    """Ratio of medians, its bootstrap percentile interval, and the Mann-Whitney U p-value."""
    from scipy.stats import mannwhitneyu

    ratio = float(np.median(n) / np.median(b))
    rng = np.random.default_rng(seed)
    boot_b = np.median(b[rng.integers(0, b.size, (n_boot, b.size))], axis=1)
    boot_n = np.median(n[rng.integers(0, n.size, (n_boot, n.size))], axis=1)
    lo, hi = np.quantile(boot_n / boot_b, [alpha / 2, 1 - alpha / 2])
    if np.ptp(np.concatenate([b, n])) == 0:
        p = 1.0  # every sample equal: nothing tells the sides apart
    else:
        p = float(mannwhitneyu(n, b, alternative="two-sided").pvalue)
    return ratio, float(min(lo, ratio)), float(max(hi, ratio)), p


def _rounds(b: list[np.ndarray], n: list[np.ndarray], alpha: float, paired: bool) -> tuple[float, float, float, float]:
    """exp(mean log-median difference), its t interval and p (paired, or Welch's)."""
    lb = np.log([np.median(r) for r in b])
    ln = np.log([np.median(r) for r in n])
    if paired:
        d = ln - lb
        diff, se, df = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), d.size - 1.0
    else:
        vb, vn = lb.var(ddof=1) / lb.size, ln.var(ddof=1) / ln.size
        diff, se = float(ln.mean() - lb.mean()), math.sqrt(vb + vn)
        df = (vb + vn) ** 2 / (vb ** 2 / (lb.size - 1) + vn ** 2 / (ln.size - 1)) if vb + vn > 0 else 1.0
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return math.exp(diff), math.exp(diff), math.exp(diff), p
    from scipy.stats import t as student_t

    p = float(2 * student_t.sf(abs(diff) / se, df))
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half), p


def geomean_interval(rows: Sequence[Comparison], alpha: float = DEFAULT_ALPHA) -> tuple[float, float, float] | None:
    """Geometric mean of the rows' ratios and its interval: each row's log interval read as a normal
    one (half-width / z), rows independent, so the mean's standard error is sqrt(sum se^2) / k.
    It is the uncertainty of the measurement over these workloads, not over other workloads."""
    if not rows:
        return None
    from scipy.stats import norm

    z = float(norm.ppf(1 - alpha / 2))
    logs = np.log([r.ratio for r in rows])
    se = np.array([(math.log(r.ci_high) - math.log(r.ci_low)) / (2 * z) for r in rows])
    mean, se_mean = float(logs.mean()), float(math.sqrt(float((se ** 2).sum())) / len(rows))
    return math.exp(mean), math.exp(mean - z * se_mean), math.exp(mean + z * se_mean)
