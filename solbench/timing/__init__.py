"""Timing a candidate: warm-up by time, adaptive sample count, robust statistics.

Public interface (the engine's worker calls this):

    result, last_outputs = time_calls(fn, n_sets, TimingConfig(device="cuda"))

``fn(i)`` runs the candidate once on rotating input set ``i``; ``last_outputs[i]`` is a copy of
the last output fn(i) returned during timing (taken after synchronisation), so the parent can
re-check the outputs of timed calls.

Methods (``TimingConfig.method``):
  * ``cpu``: ``time.perf_counter_ns`` around each call.
  * ``events``: CUDA events around each call; before it, outside the timed window, an L2 flush
    and a short spin kernel so the start event fires only once the call is fully queued (the
    launch gap is hidden, as nvbench's blocking kernel does).
  * ``graph``: a batch of calls cycling over the sets, captured back to back into one CUDA graph;
    one event pair (after the spin) times each replay; per call = replay / calls. No flush inside
    the graph: the method reason states the L2 policy (cold when the sets exceed 2x L2).
  * CUDA samples have the measured empty-window time (an event pair around nothing, after the same
    flush and spin) taken off; ``overhead_subtracted_s`` says how much (``subtract_overhead``).
  * ``auto``: ``graph`` when one call is short (< 20 us by a first event estimate) and capture
    works, else ``events``; ``cpu`` on the CPU. ``method_reason`` says why.

The timer functions are bound here at import time: the worker imports this module before any
candidate code, so a candidate that patches ``time`` or ``torch.cuda.Event`` later does not
change what we read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from solbench.timing.config import TimingConfig, TimingError, TimingResult, clone_output, make_result
from solbench.timing.cpu import time_cpu

# Imported eagerly, so the CUDA timer functions are bound when this package is imported, before any
# candidate code (torch.cuda is importable without a device).
from solbench.timing.cuda import time_cuda


def time_calls(fn: Callable[[int], Any], n_sets: int, config: TimingConfig) -> tuple[TimingResult, dict[int, Any]]:
    """fn(i) runs the candidate once on rotating input set i; returns (result, last output per set)."""
    config.validate()
    if n_sets < 1:
        raise TimingError(f"n_sets must be >= 1, got {n_sets}")
    if config.device == "cpu":
        return time_cpu(fn, n_sets, config)
    return time_cuda(fn, n_sets, config)


__all__ = ["TimingConfig", "TimingResult", "TimingError", "time_calls", "clone_output", "make_result"]
