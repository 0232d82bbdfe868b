"""Timing statistics against independent computations: exact binomial sums (math.comb), Python's
statistics module, and a coverage simulation."""

import math
import statistics

import numpy as np
import pytest

from solbench.timing.stats import (
    StopRule,
    WarmupRule,
    ci_met,
    grid_step,
    median_ci,
    median_ci_ranks,
    median_ci_rel,
    summarize,
)


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


def _chunked(rule: StopRule, source, clock_ns=lambda n: 0) -> tuple[str, int, list[int]]:
    """Drive the chunked form as the CUPTI loop does: a chunk of samples, then the CI test on all."""
    samples: list[float] = []
    checks: list[int] = []
    while True:
        k = rule.next_chunk(len(samples))
        reason = None
        for _ in range(k):
            samples.append(source(len(samples)))
            reason = rule.limit(len(samples), clock_ns(len(samples)))
            if reason:
                return reason, len(samples), checks
        checks.append(len(samples))
        if rule.ci_met(samples):
            return "ci_target", len(samples), checks


def test_chunked_stop_reaches_the_ci_target_and_the_interval_is_within_it():
    rng = np.random.default_rng(11)
    data = rng.normal(100.0, 2.0, 10_000)  # 2% spread: the median's CI reaches 1% after some tens of samples
    rule = StopRule(min_samples=10, max_samples=2000, target_rel_ci=0.01, budget_ns=10**12)
    reason, n, checks = _chunked(rule, lambda i: float(data[i]))
    assert reason == "ci_target" and n > 10
    assert checks[0] == 10 and all(b - a >= 5 for a, b in zip(checks, checks[1:], strict=False))
    lo, hi = median_ci(data[:n])
    med = statistics.median(data[:n])
    assert max(med - lo, hi - med) <= 0.01 * med  # independently: the interval is within the target
    lo, hi = median_ci(data[:checks[-2]])
    med = statistics.median(data[:checks[-2]])
    assert max(med - lo, hi - med) > 0.01 * med  # and it was not at the check before


def test_chunked_stop_respects_floor_and_ceiling():
    const = StopRule(min_samples=12, max_samples=100, target_rel_ci=0.01, budget_ns=10**12)
    assert _chunked(const, lambda i: 5.0)[:2] == ("ci_target", 12)  # the floor, though the CI is 0 earlier
    rng = np.random.default_rng(5)
    wide = StopRule(min_samples=10, max_samples=77, target_rel_ci=0.001, budget_ns=10**12)
    assert _chunked(wide, lambda i: float(rng.uniform(1.0, 3.0)))[:2] == ("max_samples", 77)
    timed = StopRule(min_samples=10, max_samples=10**6, target_rel_ci=0.001, budget_ns=300)
    assert _chunked(timed, lambda i: float(rng.uniform(1.0, 3.0)), clock_ns=lambda n: 10 * n)[:2] == ("budget", 30)
    late = StopRule(min_samples=10, max_samples=10**6, target_rel_ci=0.001, budget_ns=0)
    assert _chunked(late, lambda i: float(rng.uniform(1.0, 3.0)))[:2] == ("budget", 10)  # never under the floor


def test_a_median_known_to_one_tick_meets_the_target():
    # A 2.5 us kernel read on a 0.25 us grid: the CI [2.25, 2.75] can never be within 1%; one tick is the limit.
    samples = [2.25e-6] * 7 + [2.5e-6] * 6 + [2.75e-6] * 7  # CI: ranks 6 and 15 of 20
    assert grid_step(samples) == pytest.approx(0.25e-6)
    assert not ci_met(samples, 0.01)
    assert ci_met(samples, 0.01, resolution_s=0.25e-6)
    assert grid_step([1.0, 1.37, 2.1, 2.2]) == 0.0  # not on a grid
    assert grid_step([1.0, 2.0]) == 0.0  # two values say nothing of a grid
    rule = StopRule(min_samples=10, max_samples=1000, target_rel_ci=0.01, budget_ns=10**12, resolution_s=0.25e-6)
    assert rule.ci_met(samples)


def test_warmup_ends_when_calls_settle_between_its_floor_and_ceiling():
    # Calls getting faster (clocks ramping) for 30 calls, then steady: 1 ms a call on a fake clock.
    times = [2e-3 * 0.95**k if k < 30 else 2e-3 * 0.95**30 for k in range(1000)]
    rule = WarmupRule(n_sets=4, min_s=0.005, max_s=0.2, stable_rel=0.02)
    n = next(n for n in range(1001) if rule.done(times[:n], n * 10**6))
    assert 30 < n <= 40  # settled: five calls after the ramp, the last 5 within 2% of the 5 before
    assert abs(statistics.median(times[n - 5:n]) / statistics.median(times[n - 10:n - 5]) - 1) <= 0.02
    assert not rule.settled(times[:30])  # still ramping
    floor = WarmupRule(n_sets=1, min_s=0.05, max_s=0.2, stable_rel=0.02)
    assert next(n for n in range(1001) if floor.done([1e-3] * n, n * 10**6)) == 50  # steady: at the floor
    ceiling = WarmupRule(n_sets=1, min_s=0.005, max_s=0.02, stable_rel=0.02)
    assert next(n for n in range(1001) if ceiling.done([1e-3 * 0.9**k for k in range(n)], n * 10**6)) == 20  # never settles
    sets = WarmupRule(n_sets=25, min_s=0.0, max_s=0.0, stable_rel=0.02)
    assert next(n for n in range(1001) if sets.done([1e-3] * n, n * 10**6)) == 25  # every set once
