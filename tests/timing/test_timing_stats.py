"""Timing statistics against independent computations: exact binomial sums (math.comb), Python's
statistics module, and a coverage simulation."""

import math
import statistics

import numpy as np
import pytest

from solbench.timing.stats import StopRule, median_ci, median_ci_ranks, median_ci_rel, summarize


def _coverage(n: int, k: int) -> float:
    """Exact coverage of [x_(k), x_(n+1-k)] for the median: 1 - 2 P(Bin(n, 1/2) <= k-1)."""
    tail = sum(math.comb(n, j) for j in range(k)) / 2**n
    return 1 - 2 * tail


@pytest.mark.parametrize("n", list(range(6, 80)) + [150, 399, 400])
def test_ranks_are_the_tightest_95_interval(n):
    lo, hi = median_ci_ranks(n)
    assert hi == n + 1 - lo
    assert _coverage(n, lo) >= 0.95
    assert _coverage(n, lo + 1) < 0.95  # one rank tighter would no longer cover 95%


def test_too_few_samples_have_no_interval():
    assert [median_ci_ranks(n) for n in range(0, 6)] == [None] * 6
    assert median_ci_rel([1.0, 2.0, 3.0]) == math.inf


@pytest.mark.parametrize("n", [401, 800, 2000])
def test_normal_approximation_within_one_rank_of_exact(n):
    lo, _ = median_ci_ranks(n)
    # Exact: the largest k with 2 * P(B <= k-1) <= 5%, accumulating the tail in exact integers.
    tail, k, total = 0, 0, 2**n
    while 40 * (tail + math.comb(n, k)) <= total:
        tail += math.comb(n, k)
        k += 1
    assert abs(lo - k) <= 1


def test_ci_covers_the_true_median_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    n, trials = 25, 2000
    true_median = 1.0  # lognormal(0, s) has median e^0
    hits = 0
    for _ in range(trials):
        lo, hi = median_ci(rng.lognormal(0.0, 0.5, n))
        hits += lo <= true_median <= hi
    assert 0.94 <= hits / trials <= 0.995


def test_ci_on_known_samples():
    samples = list(range(1, 21))  # n=20: ranks (6, 15)
    assert median_ci_ranks(20) == (6, 15)
    assert median_ci(samples[::-1]) == (6.0, 15.0)
    assert median_ci_rel(samples) == pytest.approx(max(10.5 - 6, 15 - 10.5) / 10.5)


def test_summary_matches_statistics_module():
    rng = np.random.default_rng(7)
    data = list(rng.gamma(2.0, 1e-5, 137))
    s = summarize(data)
    deciles = statistics.quantiles(data, n=10, method="inclusive")
    quartiles = statistics.quantiles(data, n=4, method="inclusive")
    assert s.median == pytest.approx(statistics.median(data))
    assert s.p10 == pytest.approx(deciles[0])
    assert s.p90 == pytest.approx(deciles[8])
    assert s.iqr == pytest.approx(quartiles[2] - quartiles[0])
    assert s.mean == pytest.approx(statistics.fmean(data))
    assert s.std == pytest.approx(statistics.stdev(data))
    assert (s.min, s.max, s.n) == (min(data), max(data), 137)


def test_stop_rule_constant_stops_at_min_samples():
    rule = StopRule(min_samples=10, max_samples=1000, target_rel_ci=0.01, budget_ns=10**12)
    samples = []
    reason = None
    while reason is None:
        samples.append(1e-3)
        reason = rule.should_stop(samples, 0)
    assert (reason, len(samples)) == ("ci_target", 10)


def test_stop_rule_noise_runs_to_budget_then_max_samples():
    rng = np.random.default_rng(3)
    rule = StopRule(min_samples=10, max_samples=10**6, target_rel_ci=0.01, budget_ns=500)
    samples, reason, t = [], None, 0
    while reason is None:
        samples.append(float(rng.uniform(1.0, 3.0)))
        t += 1
        reason = rule.should_stop(samples, t)
    assert reason == "budget" and len(samples) == 500
    rule = StopRule(min_samples=10, max_samples=50, target_rel_ci=0.01, budget_ns=10**12)
    samples, reason = [], None
    while reason is None:
        samples.append(float(rng.uniform(1.0, 3.0)))
        reason = rule.should_stop(samples, 0)
    assert reason == "max_samples" and len(samples) == 50
