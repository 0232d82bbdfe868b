"""CPU timing: perf_counter_ns around each call, warm-up by time, adaptive sample count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from solbench.timing.config import TimingConfig, TimingResult, _perf_counter_ns, clone_output, make_result
from solbench.timing.stats import StopRule


def time_cpu(fn: Callable[[int], Any], n_sets: int, config: TimingConfig) -> tuple[TimingResult, dict[int, Any]]:
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
