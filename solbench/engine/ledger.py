"""Where one record's wall time went: disjoint phases that add up to the record's ``harness.wall_s``.

A record's wall runs from the moment its lane starts it (:mod:`solbench.engine.pipeline`) to the
moment it is written. Each phase below is measured on its own and no two overlap, so their sum
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

from pydantic import BaseModel, ConfigDict, Field


class HarnessPhases(BaseModel):
    """The phases of a record's ``harness`` section, in seconds (absent: the phase did not happen)."""

    model_config = ConfigDict(extra="ignore")

    memory_wait_s: float = Field(0.0, description="waiting for device memory held by other records in flight")
    memory_retry_s: float = Field(0.0, description="a first try that ran out of device memory beside other records "
                                                   "in flight (then it ran again alone)")
    cases_s: float = Field(0.0, description="the inputs and reference outputs (made, or awaited from the other "
                                            "candidate's lane that makes them: once per problem, workload and seed)")
    worker_wait_s: float = Field(0.0, description="waiting for the worker to be up (what starting it ahead did not hide)")
    load_s: float = Field(0.0, description="the worker importing the candidate")
    setup_s: float = Field(0.0, description="the candidate's setup(...), untimed")
    rounds_s: float = Field(0.0, description="the correctness rounds (the first call and its compile included)")
    timing_request_s: float = Field(0.0, description="the timing request: the window the device is held alone")
    recheck_s: float = Field(0.0, description="the checks of the timed outputs")
    burst_s: float = Field(0.0, description="the parent-clocked burst, in the timing's window, and its checks")
    edge_s: float = Field(0.0, description="the edge rounds (legal inputs at other shapes and layouts), checked")
    device_wait_s: float = Field(0.0, description="waiting for the device gate (a timing window of another record, "
                                                  "or for this record's, untimed work in flight)")
    verdict_s: float = Field(0.0, description="the guards' review, the record built, written and handed to hooks")

    def total(self) -> float:
        return sum(getattr(self, name) for name in type(self).model_fields)


PHASES = tuple(HarnessPhases.model_fields)
# Fields of ``harness`` that are not phases of this record's wall: ``first_call_s`` (part of
# rounds_s), ``worker_start_s`` (the worker's whole start, mostly before this record began),
# ``jit_cache_restored_bytes``, ``transport``, ``transport_fallback``, ``wall_s``.


def phase_total(harness: dict[str, Any]) -> float:
    """The sum of a record's harness phases (what should account for its ``wall_s``)."""
    return HarnessPhases.model_validate({k: v for k, v in harness.items() if k in PHASES}).total()


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
