"""What the timing loops do for the parent's checks of timed calls, always outside the timed window.

The parent decides it all from a seed the worker never sees and sends it with the timing request;
the worker builds a :class:`Verify` over its timing sets, and every loop (CPU, events, graph) calls:

* :meth:`Verify.before` just before each timed sample: applies the edits due at this sample (a few
  elements of one input of one set, overwritten in place: same tensors, same addresses) and says
  which set the sample runs (``sample % n_sets``; samples are counted over every method a timing
  ran, so a graph-to-events fallback keeps the numbering the parent planned with);
* :meth:`Verify.after` just after it: keeps a copy of the output when the parent asked for it;
* :meth:`Verify.refresh` after the last sample: writes data the candidate has never seen into one
  set, in place, for one more run of the timed construct (a graph replay in graph mode, a call
  otherwise), whose output :meth:`Verify.keep_refresh` keeps for the parent to check.

``mirror`` (the worker's copies of the sets taken before timing, to tell whether the candidate
changed an input) receives the same writes, so it tells the harness's writes from the candidate's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from solbench.timing.config import TimingError, clone_output

# Bound at import, before any candidate code (an instance attribute or a patched method cannot
# redirect the harness's own writes).
_index_put_ = torch.Tensor.index_put_
_copy_ = torch.Tensor.copy_
_view = torch.Tensor.view
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bit_view(t: Any) -> Any:
    """The tensor's bits as integers of the same size (the same memory): writes through it are
    exact, and indexing works for every dtype (float8 included) on every device."""
    return _view(t, _INT_OF_SIZE[t.element_size()])


def _unravel(flat: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """Flat (row-major) indices as one index tensor per dimension (torch.unravel_index costs ~0.5 s
    on its first call in a process)."""
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat = flat // size
    return tuple(reversed(out))


@dataclass
class Edit:
    """Before timed sample ``sample``: ``sets[set][input].view(-1)[index] = values`` (in place)."""

    sample: int
    set: int
    input: int
    index: Any  # flat indices (int64 tensor)
    values: Any  # new values, the input's dtype


class Verify:
    """Edits between samples, kept outputs and the refresh run of one timing (module docstring)."""

    def __init__(self, sets: Sequence[Sequence[Any]], edits: Sequence[Edit] = (), keep: Sequence[int] = (),
                 refresh: tuple[int, Sequence[Any]] | None = None, mirror: Sequence[Sequence[Any]] | None = None):
        self.sets = sets
        self.n_sets = len(sets)
        self.keep = frozenset(keep)
        self.mirror = mirror
        self.sample = 0  # timed samples so far, every method together
        self.kept: list[tuple[int, int, Any]] = []  # (sample, set, copy of its output)
        self.refreshed: Any = None  # copy of the refresh run's output
        self._edits = sorted((self._staged(e) for e in edits), key=lambda e: e[0])
        self._next = 0
        self.refresh_set, self._refresh = (None, []) if refresh is None else self._staged_refresh(*refresh)

    def _staged(self, e: Edit) -> tuple[int, int, int, tuple[Any, ...], Any]:
        """(sample, set, input, index tuple, values), moved to the input's device before timing."""
        if not (0 <= e.set < self.n_sets and 0 <= e.input < len(self.sets[e.set])):
            raise TimingError(f"edit of set {e.set}, input {e.input}: no such input")
        t = self.sets[e.set][e.input]
        if type(t) is not torch.Tensor or not t.is_floating_point() or e.values.dtype != t.dtype:
            raise TimingError(f"edit of set {e.set}, input {e.input}: not a floating tensor of the values' dtype")
        flat = e.index.to(device=t.device, dtype=torch.int64)
        if flat.numel() != e.values.numel() or (flat.numel() and not 0 <= int(flat.min()) <= int(flat.max()) < t.numel()):
            raise TimingError(f"edit of set {e.set}, input {e.input}: indices out of range")
        return e.sample, e.set, e.input, _unravel(flat, t.shape), bit_view(e.values.to(t.device))

    def _staged_refresh(self, k: int, values: Sequence[Any]) -> tuple[int, list[tuple[int, Any]]]:
        if not 0 <= k < self.n_sets or len(values) != len(self.sets[k]):
            raise TimingError(f"refresh of set {k}: no such set, or not one value per input")
        staged = []
        for j, (t, v) in enumerate(zip(self.sets[k], values, strict=True)):
            if type(t) is torch.Tensor and isinstance(v, torch.Tensor):
                if v.shape != t.shape or v.dtype != t.dtype:
                    raise TimingError(f"refresh of set {k}, input {j}: shape or dtype differs from the set's")
                staged.append((j, v.to(t.device)))
        return k, staged

    def _targets(self, i: int, j: int) -> list[Any]:
        """Input ``j`` of set ``i``, and its mirror copy if there is one."""
        return [self.sets[i][j]] if self.mirror is None else [self.sets[i][j], self.mirror[i][j]]

    def before(self) -> int:
        """Apply the edits due before this sample; the set it runs."""
        while self._next < len(self._edits) and self._edits[self._next][0] <= self.sample:
            _, i, j, index, values = self._edits[self._next]
            for t in self._targets(i, j):
                _index_put_(bit_view(t), index, values)
            self._next += 1
        return self.sample % self.n_sets

    def after(self, out: Any) -> None:
        """The sample ran (``out``: its output, read after synchronisation); keep a copy if asked."""
        if self.sample in self.keep:
            self.kept.append((self.sample, self.sample % self.n_sets, clone_output(out)))
        self.sample += 1

    def refresh(self) -> int | None:
        """Write the refresh data into its set in place; the set to run once more (None: no refresh)."""
        if self.refresh_set is None:
            return None
        for j, value in self._refresh:
            for t in self._targets(self.refresh_set, j):
                _copy_(t, value)
        return self.refresh_set

    def keep_refresh(self, out: Any) -> None:
        self.refreshed = clone_output(out)

    @property
    def edits_applied(self) -> int:
        return self._next
