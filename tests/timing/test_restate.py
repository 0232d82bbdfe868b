"""The parent's statistics of a worker's timing reply: recomputed from the raw samples, never taken
on the worker's word (solbench.timing.restate, used by solbench.engine.evaluation)."""

import statistics

import pytest

from solbench.engine.correctness import MalformedReply
from solbench.engine.evaluation import _valid_timing
from solbench.timing import TimingError, restate


def _reply(samples: list[float], **claims: object) -> dict:
    return {"samples_s": samples, "median_s": 1e-9, "p10_s": 1e-9, "p90_s": 1e-9, "iqr_s": 0.0, "min_s": 1e-9,
            "mean_s": 1e-9, "n": 10**6, "ci95_rel": 0.0, "method": "events", "flags": [], **claims}


def test_a_summary_that_disagrees_with_its_samples_is_replaced():
    samples = [float(x) for x in (12e-6, 13e-6, 12.5e-6, 30e-6, 12e-6, 12.2e-6, 11.9e-6, 12.1e-6, 40e-6, 12.4e-6)]
    t = _valid_timing(_reply(samples))
    assert t["median_s"] == pytest.approx(statistics.median(samples))
    assert t["p10_s"] == pytest.approx(statistics.quantiles(samples, n=10, method="inclusive")[0])
    assert t["p90_s"] == pytest.approx(statistics.quantiles(samples, n=10, method="inclusive")[8])
    assert t["mean_s"] == pytest.approx(statistics.fmean(samples))
    assert (t["min_s"], t["n"], t["method"]) == (min(samples), 10, "events")  # other fields kept
    assert t["ci95_rel"] > 0.01  # ranks 2 and 9 of 10: a wide interval, not the claimed 0


@pytest.mark.parametrize("samples", [None, [], [-1e-9, 1e-6], [1e-6, float("inf")], [1e-6, float("nan")], [True, 1e-6],
                                     ["1e-6"], "1e-6"])
def test_samples_that_are_not_times_are_a_protocol_violation(samples):
    with pytest.raises(TimingError, match="samples_s"):
        restate(_reply(samples))
    with pytest.raises(MalformedReply, match="samples_s"):
        _valid_timing(_reply(samples))


def test_a_zero_sample_is_a_measurement_the_physics_floor_judges():
    """A call that launched no device work in its window reads 0 (H200: a replayed cached answer): a
    time, not a protocol violation; a median of 0 is below every floor."""
    t = restate(_reply([0.0, 0.0, 0.0, 1e-6]))
    assert t["median_s"] == 0.0 and t["min_s"] == 0.0 and t["p90_s"] > 0


def test_too_few_samples_for_an_interval_record_none():
    assert restate(_reply([1e-6, 2e-6, 3e-6]))["ci95_rel"] is None
