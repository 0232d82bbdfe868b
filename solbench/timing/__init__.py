"""Timing a candidate: warm-up by time, adaptive sample count, robust statistics.

Public interface:

    result, last_outputs = time_calls(fn, n_sets, TimingConfig(device="cuda"))

``fn(i)`` runs the candidate once on rotating input set ``i``; ``last_outputs[i]`` is a copy of
the last output fn(i) returned during timing (taken after synchronisation), so the parent can
re-check the outputs of timed calls.

The worker uses the plan form, ``timing_plan(sets, config, verify)``: a generator that yields the
argument list of every call it wants made and is sent back that call's output (or thrown its
exception), returning ``(result, last_outputs)``. The worker makes the call itself, from the one
place it calls the candidate in every phase, so no timing frame is on the stack while the
candidate runs (:func:`drive`). ``verify`` (:class:`Verify`) holds the parent's
checks: edits between samples, outputs kept at chosen samples, and the refresh run.

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

from collections.abc import Callable, Generator, Sequence
from typing import Any

# Imported eagerly, so the CUDA timer functions are bound when this package is imported, before any
# candidate code (torch.cuda is importable without a device).
from solbench.timing import cudabind
from solbench.timing.clockprobe import (
    clocks_event_reasons,
    cooldown,
    init_nvml,
    nvml_handle,
    nvml_max_sm_mhz,
    nvml_state,
    nvml_uuid,
)
from solbench.timing.config import TimingConfig, TimingError, TimingResult, clone_output, make_result, restate
from solbench.timing.cpu import time_cpu
from solbench.timing.cuda import prewarm, prime_trace, time_cuda
from solbench.timing.cudart import libcudart
from solbench.timing.cupti import DeviceTrace
from solbench.timing.verify import Edit, Verify, bit_view

Plan = Generator[Sequence[Any], Any, Any]  # yields a call's arguments, is sent its output


def timing_plan(sets: Sequence[Sequence[Any]], config: TimingConfig,
                verify: Verify | None = None) -> Generator[Sequence[Any], Any, tuple[TimingResult, dict[int, Any]]]:
    """Time calls on the rotating argument lists ``sets``; returns (result, last output per set)."""
    config.validate()
    if len(sets) < 1:
        raise TimingError(f"n_sets must be >= 1, got {len(sets)}")
    verify = verify if verify is not None else Verify(sets)
    if verify.n_sets != len(sets):
        raise TimingError(f"verify covers {verify.n_sets} sets, timing {len(sets)}")
    if config.device == "cpu":
        return (yield from time_cpu(sets, config, verify))
    return (yield from time_cuda(sets, config, verify))


def drive(plan: Plan, call: Callable[..., Any]) -> Any:
    """Make every call a plan asks for as ``call(*args)``; send each output back (an exception is
    thrown into the plan, which may handle it); return what the plan returns.

    The one place a candidate's ``run`` is called, in every phase (correctness rounds, timed calls,
    the memoization probe): the plans' own frames are suspended generators then, not on the stack,
    so a candidate that walks its callers (``sys._getframe``) sees the same function names, modules
    and lines above ``run`` whatever the phase. What still differs is not hidden: the frames'
    locals, the time between calls, whether argument tensors were seen before; the parent does not
    rely on phases looking alike (timed outputs are checked at samples it chose, see ``verify``).
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            args = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value
        value = error = None
        try:
            value = call(*args)
        except BaseException as err:  # noqa: B036 - handed to the plan, which re-raises what it does not handle
            error = err


def time_calls(fn: Callable[[int], Any], n_sets: int, config: TimingConfig,
               verify: Verify | None = None) -> tuple[TimingResult, dict[int, Any]]:
    """fn(i) runs the candidate once on rotating input set i; returns (result, last output per set)."""
    return drive(timing_plan([(i,) for i in range(n_sets)], config, verify), fn)


__all__ = ["TimingConfig", "TimingResult", "TimingError", "time_calls", "timing_plan", "drive", "Verify", "Edit",
           "clone_output", "make_result", "restate", "cudabind", "bit_view", "DeviceTrace", "libcudart", "cooldown",
           "clocks_event_reasons", "init_nvml", "nvml_handle", "nvml_max_sm_mhz", "nvml_state", "nvml_uuid", "prewarm", "prime_trace"]
