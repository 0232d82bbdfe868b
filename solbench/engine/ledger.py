"""Where one record's wall time went: disjoint phases that add up to the record's ``harness.wall_s``.

A record's wall runs from the moment its lane starts it (:mod:`solbench.engine.pipeline`) to the
moment it is written. Each phase (declared once, with the record's ``harness``:
:class:`solbench.data.record_parts.HarnessPhases`) is measured on its own and no two overlap, so their sum
accounts for the wall (a test holds it to 5%); what they leave out shows as the difference.
Waits are phases too: for the device gate (:mod:`solbench.engine.gate`), for device memory, for
the worker to be up. The work clock (:meth:`Ledger.clock`) stops while a record waits, so the
workload's timeout and the phases of the evaluation count work only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from solbench.data import HARNESS_PHASES

# The record's harness model declares the phases (solbench.data.record_parts.HarnessPhases); its other keys
# (``first_call_s``, part of rounds_s; ``worker_start_s``, mostly before this record began; ``wall_s``, the
# transport) are not phases of this record's wall.
PHASES = HARNESS_PHASES


def phase_total(harness: dict[str, Any]) -> float:
    """The sum of a record's harness phases (what should account for its ``wall_s``)."""
    return sum(float(harness.get(name) or 0.0) for name in PHASES)


class Ledger:
    """One record's phases, charged as they happen (thread-safe: the gate charges waits from any thread)."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.monotonic() if start is None else start
        self.phases: dict[str, float] = {}
        self.waited = 0.0
        self._lock = threading.Lock()

    def clock(self) -> float:
        """The work clock: monotonic time less the waits so far."""
        return time.monotonic() - self.waited

    def add(self, name: str, seconds: float) -> None:
        if name not in PHASES:
            raise ValueError(f"{name!r} is not a harness phase (declare it in solbench.data.record_parts.HarnessPhases)")
        with self._lock:
            self.phases[name] = self.phases.get(name, 0.0) + max(seconds, 0.0)

    def wait(self, name: str, seconds: float) -> None:
        """A wait: charged to ``name`` and taken off the work clock."""
        self.add(name, seconds)
        with self._lock:
            self.waited += max(seconds, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the work done inside to ``name`` (waits inside go to their own phases)."""
        began = self.clock()
        try:
            yield
        finally:
            self.add(name, self.clock() - began)

    def wall(self) -> float:
        return time.monotonic() - self.start
