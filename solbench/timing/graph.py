"""Graph mode: a batch of calls captured back to back into one CUDA graph; a replay is timed by one
event pair (after a spin, as in events mode) and per call = (replay - empty window) / calls.

Why a batch and not per-call events inside the graph: on the H200 an in-graph event pair with a
flush node before each call added ~3 us per call (4 KiB add: 4.29 us vs CUPTI 1.22 us), while N
unrolled calls under one event pair read 1.15 us for a 0.8 us kernel (do_bench_cudagraph's way).

There is no flush inside the graph (its cost would swamp a 1 us call and could not be subtracted
reliably), so the L2 is as warm as the rotating input sets leave it: the method reason says which
(`l2: cold` when the sets hold more than 2x L2 of input bytes, else `l2: warm`, or unknown).

A capture that fails must not poison the process: torch's ``torch.cuda.graph`` context leaves the
side stream current and the default CUDA generator in capture state when ``capture_end`` raises
(every later ``torch.rand`` then fails with "Offset increment outside graph capture"). So the
capture here runs inside a plain stream context (always exited), ends the capture on failure, and
puts back a clone of the generator state taken before capture; the outcome is checked by drawing
one random number and recorded, and the engine should retire the worker after ``graph_fallback``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import torch

from solbench.timing.cudabind import CUDAGraph as _CUDAGraph
from solbench.timing.cudabind import Stream as _Stream
from solbench.timing.cudabind import stream_ctx as _stream_ctx
from solbench.timing.cudabind import synchronize as _synchronize

GRAPH_MAX_CALLS = 1000
GRAPH_MIN_CALLS = 2  # long calls: few per replay, so forced graph mode stays within the budget
GRAPH_REPLAY_TARGET_S = 1e-3  # the replay's fixed costs (event pair, graph launch) / calls stay small


def batch_calls(est_s: float, n_sets: int) -> int:
    """Calls per replay: ~1 ms of work, at least every set once, a whole number of set cycles."""
    calls = int(min(GRAPH_MAX_CALLS, max(GRAPH_MIN_CALLS, GRAPH_REPLAY_TARGET_S / max(est_s, 1e-7))))
    calls = max(calls, n_sets)
    return -(-calls // n_sets) * n_sets  # every set the same number of times


def l2_policy(n_sets: int, set_bytes: int | None, l2_bytes: int) -> str:
    """How warm the L2 is across back-to-back graph calls, in words for the method reason."""
    if not set_bytes:
        return f"l2: not flushed, {n_sets} rotating sets of unknown size"
    total = n_sets * set_bytes
    state = "cold" if total > 2 * l2_bytes else "warm"
    return f"l2: {state} ({n_sets} rotating sets, {total / 2**20:.1f} MiB vs L2 {l2_bytes / 2**20:.0f} MiB, no flush)"


def _rng_snapshot(device: torch.device) -> Any | None:
    try:
        return torch.cuda.default_generators[device.index or 0].clone_state()
    except Exception:  # noqa: BLE001 - older torch: no clone; the check below still reports
        return None


def restore_rng(device: torch.device, snapshot: Any | None) -> str:
    """Put the default CUDA generator back after a failed capture; 'ok' when a draw then works."""
    note = ""
    if snapshot is not None:
        try:
            torch.cuda.default_generators[device.index or 0].graphsafe_set_state(snapshot)
        except Exception as err:  # noqa: BLE001 - reported; the draw below decides
            note = f"; restore failed: {type(err).__name__}: {err}"
    try:
        torch.empty(1, device=device).uniform_()
        _synchronize()
        return "ok" + note
    except Exception as err:  # noqa: BLE001 - the worker must be retired; the caller flags it
        return f"poisoned: {type(err).__name__}: {str(err)[:160]}{note}"


def capture(sets: Sequence[Sequence[Any]], calls: int, device: torch.device,
            main_stream: Any) -> Generator[Sequence[Any], Any, tuple[Any, dict[int, Any]]]:
    """A graph of `calls` back-to-back calls cycling over the sets; the last output of each set.

    A plan (solbench.timing.timing_plan): yields each call's arguments, is sent its output.
    Raises what the capture raised, after undoing its side effects (see module docstring); the
    RNG outcome is attached to the exception as ``rng_status``."""
    n_sets = len(sets)
    side = _Stream(device=device)
    side.wait_stream(main_stream)
    with _stream_ctx(side):  # warm up on the capture stream (lazy inits, library workspaces)
        for k in range(min(3, n_sets)):
            yield sets[k]
    main_stream.wait_stream(side)
    _synchronize()
    graph = _CUDAGraph()
    outs: dict[int, Any] = {}
    rng = _rng_snapshot(device)
    try:
        with _stream_ctx(side):  # exited even when the capture fails: the side stream never stays current
            graph.capture_begin()
            try:
                for j in range(calls):
                    outs[j % n_sets] = yield sets[j % n_sets]  # older outputs are freed and reused in the graph's pool
            except BaseException:
                try:
                    graph.capture_end()
                except Exception:  # noqa: BLE001 - the capture is already invalid; ending it is cleanup
                    pass
                raise
            graph.capture_end()
        _synchronize()
    except Exception as err:
        try:
            _synchronize()
        except Exception:  # noqa: BLE001 - a sticky error will surface in the events loop itself
            pass
        err.rng_status = restore_rng(device, rng)  # type: ignore[attr-defined]
        raise
    return graph, outs
