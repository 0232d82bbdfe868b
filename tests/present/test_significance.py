"""The statistics of `solbench compare` on synthetic samples of known shifts: false positives,
power, interval coverage, and the verdicts the issue asks for."""

from __future__ import annotations

import numpy as np
import pytest

from solbench.present.significance import compare_samples, geomean_interval, verdict
from solbench.timing.config import TimingConfig
from solbench.timing.stats import StopRule

T0 = 100e-6


def default_sampling(rng: np.random.Generator, shift: float, sigma: float = 0.03) -> list[float]:
    """Samples drawn until the engine's default stopping rule stops (median known to +-1%, at least
    10, at most the ceiling): lognormal noise plus 2% of samples 30% slow, as GPU timings have."""
    cfg = TimingConfig()
    rule = StopRule(cfg.min_samples, cfg.max_samples, cfg.target_rel_ci, 10**18)
    out: list[float] = []
    while not rule.should_stop(out, 0):
        x = T0 * (1 + shift) * np.exp(rng.normal(0.0, sigma))
        out.append(x * 1.3 if rng.random() < 0.02 else x)
    return out


def noisy(rng: np.random.Generator, shift: float, n: int = 200, sigma: float = 0.01) -> list[float]:
    return list(T0 * (1 + shift) * np.exp(rng.normal(0.0, sigma, n)))


def test_no_shift_false_slower_rate_at_most_5_percent():
    # With no minimum effect the test alone decides: its false "slower" rate is its level's half.
    slower = slower_default = 0
    seeds = 300
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        b, n = default_sampling(rng, 0.0), default_sampling(rng, 0.0)
        slower += compare_samples([b], [n], min_effect=0.0, n_boot=200).verdict == "slower"
        slower_default += compare_samples([b], [n], n_boot=200).verdict == "slower"
    assert slower / seeds <= 0.05
    assert slower_default / seeds <= 0.05


def test_five_percent_shift_detected_with_default_sampling():
    hits = sum(compare_samples([default_sampling(rng, 0.0)], [default_sampling(rng, 0.05)], n_boot=200).verdict
               == "slower" for rng in (np.random.default_rng(1000 + s) for s in range(100)))
    assert hits >= 95


@pytest.mark.parametrize(("shift", "expected", "at_least"), [(0.0, "same", 0.95), (0.01, "same", 0.75),
                                                            (0.05, "slower", 0.95), (0.20, "slower", 1.0)])
def test_known_shifts(shift, expected, at_least):
    got = [compare_samples([default_sampling(rng, 0.0)], [default_sampling(rng, shift)], n_boot=200).verdict
           for rng in (np.random.default_rng(2000 + s) for s in range(40))]
    assert got.count(expected) / len(got) >= at_least


def test_done_when_one_percent_noise():
    rng = np.random.default_rng(7)
    base = noisy(rng, 0.0)
    assert compare_samples([base], [noisy(rng, 0.10)]).verdict == "slower"
    assert compare_samples([base], [noisy(rng, 0.002)]).verdict == "same"
    assert compare_samples([base], [noisy(rng, -0.10)]).verdict == "faster"


def test_interval_covers_the_true_ratio():
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(3000 + seed)
        c = compare_samples([noisy(rng, 0.0, 100, 0.03)], [noisy(rng, 0.05, 100, 0.03)], n_boot=400)
        covered += c.ci_low <= 1.05 <= c.ci_high
    assert covered / 200 >= 0.90  # a nominal 95% percentile bootstrap of a median, at n = 100


def test_rounds_see_the_drift_between_runs():
    # Each run drifts by up to +-15% (power history); within a run the noise is 0.5%. With one
    # record per side, samples alone call a pure drift significant; Welch over rounds does not;
    # paired rounds of one interleaved run cancel the drift and find a real 5% slowdown.
    rng = np.random.default_rng(11)
    drift = rng.uniform(-0.15, 0.15, 6)
    base = [noisy(rng, d, 100, 0.005) for d in drift]
    same = [noisy(rng, d, 100, 0.005) for d in drift]
    slower = [noisy(rng, (1 + d) * 1.05 - 1, 100, 0.005) for d in drift]
    c = compare_samples(base, same)
    assert (c.method, c.verdict) == ("rounds, Welch t", "same")
    assert compare_samples(base, slower).verdict == "same"  # Welch: the drift hides 5%
    paired = compare_samples(base, slower, paired=True)
    assert (paired.method, paired.verdict) == ("rounds, paired t", "slower")
    assert paired.ci_low <= 1.05 <= paired.ci_high
    single = compare_samples([base[0]], [same[1]])
    assert single.method.startswith("samples")


def test_welch_false_positive_rate():
    bad = 0
    for seed in range(300):
        rng = np.random.default_rng(4000 + seed)
        b = [noisy(rng, d, 20, 0.01) for d in rng.normal(0, 0.05, 4)]
        n = [noisy(rng, d, 20, 0.01) for d in rng.normal(0, 0.05, 4)]
        bad += compare_samples(b, n, min_effect=0.0).verdict != "same"
    assert bad / 300 <= 0.08  # two-sided at 5%, with sampling slack


def test_verdict_rule_and_geomean():
    assert verdict(1.10, 0.01) == "slower" and verdict(1.01, 1e-9) == "same" and verdict(0.9, 0.2) == "same"
    assert verdict(0.97, 0.001) == "faster" and verdict(1.03, 0.001, min_effect=0.05) == "same"
    rng = np.random.default_rng(5)
    rows = [compare_samples([noisy(rng, 0.0)], [noisy(rng, s)]) for s in (0.10, -0.10, 0.0)]
    gm, lo, hi = geomean_interval(rows)
    assert gm == pytest.approx(np.exp(np.mean(np.log([r.ratio for r in rows]))))
    assert lo < gm < hi and hi / lo < 1.02


def test_unusable_samples_are_refused():
    with pytest.raises(ValueError):
        compare_samples([[float("nan"), -1.0, "x"]], [[1e-6]])
