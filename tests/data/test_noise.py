"""Noisy timings: flagged by their 95% interval or their tail, judged against the median."""

from __future__ import annotations

import pytest

from solbench.data.noise import NOISY_CI95_REL, NOISY_P90_RATIO, noisy_reason


@pytest.mark.parametrize(("timing", "noisy"), [
    ({"median_s": 1.0, "p90_s": 1.05, "ci95_rel": 0.01}, False),
    ({"median_s": 1.0, "p90_s": 30.0, "ci95_rel": 31.0}, True),  # the case: ci95_rel 31, p90 30x
    ({"median_s": 1.0, "p90_s": 1.0, "ci95_rel": NOISY_CI95_REL * 1.01}, True),
    ({"median_s": 1.0, "p90_s": NOISY_P90_RATIO * 1.01, "ci95_rel": 0.0}, True),
    ({"median_s": 1.0, "p90_s": NOISY_P90_RATIO, "ci95_rel": NOISY_CI95_REL}, False),  # at the bounds: not noisy
    ({"ci95_rel": None}, False), ({}, False), (None, False), ({"ci95_rel": True}, False),
    ({"ci95_rel": float("nan")}, False),
])
def test_noisy_reason(timing, noisy):
    assert (noisy_reason(timing) is not None) is noisy


def test_reason_names_both_measures():
    why = noisy_reason({"median_s": 1e-3, "p90_s": 30e-3, "ci95_rel": 31.0})
    assert why == "noisy timing: 95% interval ±3100% of the median, p90 30.0x the median"
