"""CPU timing: perf_counter_ns around each call, warm-up by time, adaptive sample count.

A plan (see :func:`solbench.timing.timing_plan`): it yields each call's arguments and is sent back
the output, so the caller, not this loop, calls the candidate.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from solbench.timing.config import TimingConfig, TimingResult, _perf_counter_ns, clone_output, make_result
from solbench.timing.stats import StopRule, WarmupRule
from solbench.timing.verify import Verify


def time_cpu(sets: Sequence[Sequence[Any]], config: TimingConfig,
             verify: Verify) -> Generator[Sequence[Any], Any, tuple[TimingResult, dict[int, Any]]]:
    clock = _perf_counter_ns
    n_sets = len(sets)
    last: dict[int, Any] = {}
    # Warm-up by time, all of warmup_s (the floor is the ceiling here: the early end when calls settle
    # saves device time on a GPU; on the CPU the calls' own caches and clocks settle more slowly than
    # five calls show); every set at least once so first-touch costs of each set are paid here.
    warm = WarmupRule(n_sets, config.warmup_s, config.warmup_s, config.warmup_stable_rel, min_calls=1)
    warm_times: list[float] = []
    w0 = clock()
    while not warm.done(warm_times, clock() - w0):
        t0 = clock()
        yield sets[len(warm_times) % n_sets]
        warm_times.append((clock() - t0) * 1e-9)
    warm_calls = len(warm_times)
    warmup_wall_s = (clock() - w0) * 1e-9

    rule = StopRule(config.min_samples, config.max_samples, config.target_rel_ci, int(config.budget_s * 1e9))
    samples: list[float] = []
    t_start = clock()
    while True:
        i = verify.before()  # the parent's edits, outside the timed window
        args = sets[i]
        t0 = clock()
        out = yield args
        t1 = clock()
        samples.append((t1 - t0) * 1e-9)
        last[i] = clone_output(out)  # outside the timed window
        verify.after(out)
        reason = rule.should_stop(samples, clock() - t_start)
        if reason:
            break
    k = verify.refresh()
    if k is not None:
        verify.keep_refresh((yield sets[k]))
    result = make_result(samples, method="cpu", method_reason="device is cpu: perf_counter_ns around each call",
                         flush_bytes=0, warmup_calls=warm_calls, stop_reason=reason,
                         details={"warmup_s": warmup_wall_s, "sampling_s": (clock() - t_start) * 1e-9})
    return result, last
