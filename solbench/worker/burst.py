"""The worker's side of the parent-clocked burst: back-to-back calls on the timed sets, edited between calls.

After a timing the parent asks for a burst (``{"op": "burst", "calls": n, "edits": [...], "expect": [...]}``,
:mod:`solbench.engine.burst`) and measures, with its own clock, how long the worker takes to return the
outputs of ``n`` calls. The worker runs them on the sets it kept from the timing (as the timing and the
parent's refresh left them), call ``c`` on set ``c % n_sets``; before a call the edit planned for it, if
any, overwrites a few elements of one input of that set in place with values the candidate has not seen;
after it a copy of its output is kept, in room allocated by a ``burst_prepare`` request before
the burst (``{"op": "burst_prepare", "calls": n, "expect": [...]}``: nothing about the inputs, so
nothing to compute ahead), with the reply's shared-memory file, its pages faulted in then (:func:`reply_arena`). Every output goes back: the parent checks calls it chooses only
once the reply is in, so no call can be skipped safely.

Edits arrive packed per input (``{"input": j, "calls": int64 [c], "index": int64 [c, E], "values": [c, E]}``)
and are staged on the device once, before the first call, so the window holds the calls, one small write
per call and the copies of the outputs, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import torch

from solbench.timing import TimingError, bit_view, clone_output

# Bound at import, before any candidate code.
_index_put_ = torch.Tensor.index_put_
_copy_ = torch.Tensor.copy_



class Staged:
    """The edits on the device: per input its indices (one tensor per dimension) and values, ``[c, E]``
    each, and per call the input and row of its edit (the rows are picked in the loop, so the parent's
    measure of the harness's own work covers that too)."""

    def __init__(self) -> None:
        self.inputs: dict[int, tuple[tuple[Any, ...], Any]] = {}
        # Per call its input and its row, in two dicts of ints: the garbage collector tracks neither (a
        # tuple per call, 20,000 of them, set off collections of the worker's objects in its burst).
        self.calls: dict[int, int] = {}
        self.rows: dict[int, int] = {}

    def __contains__(self, c: int) -> bool:
        return c in self.calls

    def __len__(self) -> int:
        return len(self.calls)


def _unravel(flat: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat = flat // size
    return tuple(reversed(out))


def stage_edits(sets: Sequence[Sequence[Any]], edits: Any, calls: int) -> Staged:
    """The packed edits, checked and moved to the inputs' device; per call at most one."""
    staged = Staged()
    for entry in edits or []:
        j = entry.get("input")
        if not isinstance(j, int) or not 0 <= j < len(sets[0]):
            raise TimingError(f"burst edit of input {j!r}: no such input")
        t = sets[0][j]
        index, values, at = entry["index"], entry["values"], entry["calls"]
        if type(t) is not torch.Tensor or not t.is_floating_point() or values.dtype != t.dtype:
            raise TimingError(f"burst edit of input {j}: not a floating tensor of the values' dtype")
        if index.dim() != 2 or values.shape != index.shape or at.shape != index.shape[:1]:
            raise TimingError(f"burst edit of input {j}: index, values and calls do not match")
        if index.numel() and not 0 <= int(index.min()) <= int(index.max()) < t.numel():
            raise TimingError(f"burst edit of input {j}: indices out of range")
        if j in staged.inputs:
            raise TimingError(f"burst edits of input {j}: given twice")
        staged.inputs[j] = (_unravel(index.to(device=t.device, dtype=torch.int64), t.shape), bit_view(values.to(t.device)))
        for row, c in enumerate(at.tolist()):
            if not 0 <= c < calls or c in staged.calls:
                raise TimingError(f"burst edit of call {c}: out of range or repeated")
            staged.calls[c], staged.rows[c] = j, row
    return staged


def output_buffers(calls: int, expect: Sequence[dict[str, Any]], device: str) -> list[Any]:
    """Room for every call's outputs as the parent expects them, one tensor ``[calls, *shape]`` per
    output, allocated and touched now (before the burst, in a request of its own), so keeping an output
    costs a copy, not an allocation, and the reply carries one tensor per output, not one per call."""
    from solbench.data import torch_dtype

    bufs = []
    for e in expect:
        b = torch.empty([calls, *(int(d) for d in e["shape"])], dtype=torch_dtype(e["dtype"]), device=device)
        b.zero_()
        bufs.append(b)
    return bufs


def reply_arena(buffers: list[Any]) -> Any:
    """A shared-memory file for the burst's reply (:class:`solbench.worker.wire.SendArena`), sized for its
    rows and every page of it faulted in now, by a copy of the zeroed rows (in ``burst_prepare``, before
    the parent's clock); None for device rows or a reply small enough for inline frames. The reply's
    copy into a fresh file paid a page fault every 4 KiB inside the clock: on a 2-core machine
    (2026-12-02) 5-25 us per 8 KiB row of ``tiny.scaled_add`` n32, more than the harness's loop and
    several times an honest tiny call, and noisy with the machine's load; into this file it is a copy
    (0.8 us per row, the kernel's count over both threads), which the parent's estimate of the
    harness's work counts (:func:`solbench.engine.burst.harness_overhead`)."""
    from solbench.worker.wire import SHM_MIN_BYTES, SendArena

    if not buffers or any(b.device.type != "cpu" for b in buffers):
        return None
    if sum(b.numel() * b.element_size() for b in buffers) < SHM_MIN_BYTES:
        return None
    arena = SendArena()
    if arena.write(buffers) is None:  # too large for an arena, or no sealable memfd here: a fresh file
        arena.close()
        return None
    return arena


def _keep(out: Any, buffers: list[Any] | None, c: int) -> Any:
    """Copy ``out`` into row ``c`` of ``buffers`` when it is what the parent expects (exact torch.Tensors
    of the expected shapes and dtypes, on the worker's device: one, or a tuple or list of them) and return None; otherwise
    return a copy of it that later calls cannot change."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    if buffers is None or c >= buffers[0].shape[0] or len(items) != len(buffers) or not all(
            type(o) is torch.Tensor and o.shape == b.shape[1:] and o.dtype == b.dtype and o.device == b.device
            for o, b in zip(items, buffers, strict=True)):
        return clone_output(out)
    for o, b in zip(items, buffers, strict=True):
        _copy_(b[c], o)
    return None


def burst_plan(sets: Sequence[Sequence[Any]], calls: int, staged: Staged, buffers: list[Any] | None = None,
               sync: Callable[[], None] | None = None) -> Generator[Sequence[Any], Any, dict[int, Any]]:
    """``calls`` calls back to back over ``sets`` (a plan, see :func:`solbench.timing.drive`); every output
    is copied into its row of ``buffers``; returns copies of those that did not fit there, by call.

    ``sync`` (a device synchronisation, on a GPU) runs after each call, before its output is kept and
    the next edit is made: a call's work on any stream is done by then, as in the rounds and the
    timing (H200: side-stream candidates read half-finished in the burst without it)."""
    n_sets = len(sets)
    misfits = {}
    for c in range(calls):
        s = c % n_sets
        j = staged.calls.get(c)
        if j is not None:
            row = staged.rows[c]
            index, values = staged.inputs[j]
            _index_put_(bit_view(sets[s][j]), tuple(x[row] for x in index), values[row])
        out = yield sets[s]
        if sync is not None:
            sync()
        kept = _keep(out, buffers if buffers else None, c)
        if kept is not None:
            misfits[c] = kept
    return misfits
