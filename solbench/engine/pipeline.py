"""The pipelined schedule: several lanes in flight, bounded by cores and device memory.

A lane is one candidate on one problem's workloads, in order, on one worker (reused while healthy).
Up to ``in_flight`` lanes run at once, each on a thread of the parent: while one lane's item is
timed (the device gate held alone, :mod:`solbench.engine.gate`), the others start their workers,
import and compile their candidates, make inputs and reference outputs, run correctness rounds and
check timed outputs, holding the gate shared. Each record reserves its device memory first
(:class:`MemoryGate`). The inputs and reference outputs of a (problem, workload) are made once and
shared by every candidate's lane of the run (:class:`CasesCache`): the parent's tensors are never
handed to a worker (the transports copy them), so no candidate can write what another one reads.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from solbench.data import Problem, Workload
from solbench.engine.burst import room_bytes
from solbench.engine.cases import timing_set_count
from solbench.engine.cudalock import process_locker
from solbench.engine.gate import DeviceGate
from solbench.engine.ledger import Ledger
from solbench.engine.verification import KEEP_EARLY, KEEP_LATE
from solbench.settings import (
    FREE_POLL_S,
    GATE_SLICE_S,
    LANE_SWITCH_INTERVAL_S,
    MAX_FLUSHED_TIMING_SETS,
    MEMORY_WAIT_AGE_S,
)
from solbench.worker import CandidateFile

# Of the device's memory, for the records in flight (the rest: contexts, caches). H200 call 23 (2026-12-03): at
# 0.85, with 16 lanes, 24 records ran out of memory (a process of 63 GiB found the device full) and ran again,
# one failed in cuBLAS's allocation: back to 0.7.
MEMORY_SHARE_CUDA = 0.7
MEMORY_SHARE_CPU = 0.5  # of MemAvailable
CACHE_SHARE = 0.2  # of that, for inputs and references kept for a (problem, workload)'s other candidates
REPLY_EXTRA_OUTPUTS = KEEP_EARLY + KEEP_LATE + 1  # a timing reply's outputs beside each set's last: kept samples, refresh
RECORD_FIXED_BYTES = 1 << 30  # a worker's context and allocator slack, per record in flight
MAX_IN_FLIGHT = 8
MAX_IN_FLIGHT_CUDA = 12
SPARE_LANES = 4  # threads beyond the lanes in flight, for the slots of lanes waiting for memory (LaneSlots)
TIMING_BATCH_DELAY_S = 1.0  # the longest a timing waits for its batch (solbench.engine.gate) to fill


def timing_batch(in_flight: int) -> int:
    """Timings the gate gathers before it holds untimed work back: half the lanes in flight."""
    return max(1, in_flight // 2)


def device_gate(device: str, in_flight: int, unbatched: bool = False) -> DeviceGate:
    """The run's gate: timings gathered in batches of half the lanes (each batch waits once for the untimed
    requests in flight that it cannot lock to end; none when it can lock them all); on CUDA it locks, through
    the driver, the processes whose replies those requests await. ``unbatched``: no batch, phase-fair, the
    untimed work's slice (``GATE_SLICE_S``) after each window, for a driver that locks every worker. Not the default: H200 call 23
    (2026-12-03), this driver refused most workers (code 801) and the pass went slower than with batches."""
    locker = process_locker() if device.startswith("cuda") else None
    if unbatched and locker is not None:
        gate = DeviceGate(slice_s=GATE_SLICE_S, fair=True)
    else:
        gate = DeviceGate(batch=timing_batch(in_flight), max_delay_s=TIMING_BATCH_DELAY_S)
    gate.lock = locker
    return gate


@dataclass
class Lane:
    """One candidate on one problem's workloads, run in order on one worker."""

    problem: Problem
    workloads: list[Workload]
    candidate: CandidateFile


def default_in_flight(device: str, cores: int) -> int:
    """Lanes at once: half the cores (their workers import, compile and check on them), 1 to 8;
    on CUDA three quarters (their workers mostly wait on the device or for their timing), up to 12. H200 call
    23 (2026-12-03): 16 lanes held more device memory than the records' reservations counted."""
    if device.startswith("cuda"):
        return max(1, min(MAX_IN_FLIGHT_CUDA, cores * 3 // 4))
    return max(1, min(MAX_IN_FLIGHT, cores // 2))


def default_hosts(in_flight: int, cores: int, device: str = "cpu") -> int:
    """Problem hosts a run keeps: one per two lanes (a problem's candidates share its cases, made
    once), at most a quarter of the cores (each imports torch, holds a device context and makes
    inputs and references on the CPU), at least one. On CUDA up to half the cores: the references
    run on the device, and every check of a lane's records (its burst's and timed outputs') goes to
    the host that made its cases (H200, 2026-12-02: lanes waited on four hosts' replies)."""
    share = 2 if device.startswith("cuda") else 4
    return max(1, min(in_flight // 2, cores // share))


def set_count(problem: Problem, axes: dict[str, int], device_type: str, l2_bytes: int | None) -> int:
    """The timing sets a record's cases hold at most: as many as a flushed timing makes (enough inputs to exceed
    2x L2, 2 to ``MAX_FLUSHED_TIMING_SETS``: :func:`solbench.engine.cases.timing_set_count`); the most where L2 is
    unknown. H200 call 25 (2026-12-03): counted at 4 for every workload, a record of GiBs of inputs (2 sets)
    reserved ~40% more than it holds, and the lanes waited 1,612 s for memory (a third of their time)."""
    if not l2_bytes:
        return MAX_FLUSHED_TIMING_SETS
    o = problem.declared_bytes(problem.outputs, axes)
    return timing_set_count(max(problem.auto_bytes(axes) - o, 1), device_type, l2_bytes, 1 << 62, flushed=True)


def record_bytes(problem: Problem, workload: Workload, rounds: int, device_type: str = "cuda",
                 l2_bytes: int | None = None) -> int:
    """A bound on the device memory one record in flight holds, counted where it lives (the inputs ``i`` and
    outputs ``o`` of one call, ``s`` timing sets, ``k`` outputs a timing reply carries):

    * the parent's cases: every round's and timing set's inputs and reference outputs, ``(rounds + s)(i + o)``;
    * the worker's device pool, the parent's allocation: a timing request's sets and reply area, ``s i + k o``,
      or the burst's room, whichever is more;
    * the parent's copies of the timing reply (the sets as the worker left them, every output), ``s i + k o``;
    * the worker's own copies of the sets (the burst runs on them), ``s i``, and the last output of each set,
      ``(s + 1) o``;
    * the problem host's pool, one case, ``i + o``;
    * the burst's outputs in the worker (up to 4 GiB on a GPU: left out, records ran out beside others);
    * a worker's context and allocator slack.

    H200, 2026-12-03: the former count, ``(rounds + 7)(i + o)`` and the burst's room, was about half of this;
    records it let in found the device full (the parent held 45-86 GiB of 140), ran out of memory in their
    references and ran again, some alone, while every other lane waited. ``s``: :func:`set_count` (``l2_bytes``,
    the device's L2)."""
    axes = problem.resolve_axes(workload)
    o = problem.declared_bytes(problem.outputs, axes)
    i = max(problem.auto_bytes(axes) - o, 0)
    s = set_count(problem, axes, device_type, l2_bytes)
    k = s + REPLY_EXTRA_OUTPUTS
    room = room_bytes(o, device_type)
    timing_request = s * i + k * o
    return ((rounds + s) * (i + o) + max(timing_request, room) + timing_request + s * i + (s + 1) * o + (i + o)
            + room + RECORD_FIXED_BYTES)


def cases_bytes(problem: Problem, workload: Workload, rounds: int, device_type: str = "cuda",
                l2_bytes: int | None = None) -> int:
    """The part of :func:`record_bytes` that is the parent's cases (the rounds' and timing sets' inputs and
    reference outputs): in use already when another lane made them."""
    axes = problem.resolve_axes(workload)
    return (rounds + set_count(problem, axes, device_type, l2_bytes)) * problem.auto_bytes(axes)


class LaneSlots:
    """The lanes at work at once (``size``): a lane that waits for device memory lends its slot meanwhile
    (:meth:`idle`), so that a spare thread runs another lane instead of every thread waiting. H200, 2026-12-03
    (call 22): lanes at the largest workloads waited 948 s of the run's 3,840 lane-seconds for memory while
    the timing windows held the device 22% of the run."""

    def __init__(self, size: int) -> None:
        self._free = threading.Semaphore(max(1, size))
        self._local = threading.local()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Hold a slot (waiting for one) while this thread runs a lane."""
        self._free.acquire()
        self._local.held = True
        try:
            yield
        finally:
            self._local.held = False
            self._free.release()

    @contextmanager
    def idle(self) -> Iterator[None]:
        """This thread's slot lent while it waits (a no-op on a thread that holds none); taken back after."""
        if not getattr(self._local, "held", False):
            yield
            return
        self._local.held = False
        self._free.release()
        try:
            yield
        finally:
            self._free.acquire()
            self._local.held = True


class MemoryWaitStopped(Exception):
    """The run was stopped while a record waited for its memory: it never started (no record is written)."""


class MemoryGate:
    """Bytes of device memory reserved by the records in flight; a record that would overflow the
    budget waits (one alone is always let in, whatever its size: it is checked against what is free).
    ``alone``: the whole budget, once every other reservation is gone (a record that ran out of
    memory beside others runs again so); while one waits for it, no other is let in.

    ``free_bytes`` (the device's free memory now, every process's use counted): beside others, a record
    also waits until that many bytes are free. The reservations are estimates; what the records in
    flight really hold is what the device has left (H200, 2026-12-02: records let in by their estimates
    found the device full, ran out of memory in their references and ran again, then alone)."""

    def __init__(self, budget: int, free_bytes: Callable[[], int] | None = None,
                 idle: Callable[[], AbstractContextManager[None]] = nullcontext):
        self.budget = budget
        self.held = 0
        self.free_bytes = free_bytes
        self.idle = idle  # what a waiting record's thread does meanwhile (its lane slot lent: LaneSlots.idle)
        self.stop: threading.Event | None = None  # set: a record still waiting gives up (MemoryWaitStopped)
        self._alone_waiting = 0
        self._waiting: dict[int, tuple[float, int]] = {}  # records waiting now: (since when, bytes), by token
        self.age_s = MEMORY_WAIT_AGE_S  # a record waiting this long keeps its room (math.inf: never)
        self._tokens = itertools.count()
        self._cond = threading.Condition()
        # Lane-seconds waited, by cause: the reservations past the budget, a record waiting to run alone
        # (and those behind it), the device's free memory short of the estimate (what the reservations miss), a
        # record that would take the room of one waiting longer than MEMORY_WAIT_AGE_S.
        self.waits_s = {"budget": 0.0, "alone": 0.0, "behind_alone": 0.0, "device_free": 0.0, "behind_aged": 0.0}

    def _cause(self, nbytes: int, alone: bool, free_need: int, token: int | None = None) -> str | None:
        """Why a record must wait now (a key of :attr:`waits_s`), or None. ``token``: the waiting record's own."""
        if not self.held:
            return None
        if self._alone_waiting and not alone:
            return "behind_alone"
        if self.held + nbytes > self.budget:
            return "alone" if alone else "budget"
        if not alone and self.held + nbytes + self._aged_bytes(token) > self.budget:
            return "behind_aged"
        if self.free_bytes is not None and self.free_bytes() < free_need:
            return "device_free"
        return None

    def _aged_bytes(self, token: int | None) -> int:
        """The bytes of the record waiting longest, if it has waited :attr:`age_s` and is not ``token``'s: a
        record may go in beside others only leaving it room. Else smaller records kept entering while a large one
        waited (H200 call 32: reservations of 20-40 GiB waited 42 s each at the mean, of 40 GiB and more 107 s,
        while the records held 43 GiB of the 78 GiB budget on average)."""
        if self.age_s == float("inf"):  # never (the default): nothing to look at
            return 0
        others = [(since, n) for t, (since, n) in self._waiting.items() if t != token]
        if not others:
            return 0
        since, n = min(others)
        return n if time.monotonic() - since >= self.age_s else 0

    def acquire(self, nbytes: int, ledger: Ledger | None = None, alone: bool = False,
                free_need: int | None = None) -> int:
        """Reserve ``nbytes`` (``alone``: the whole budget); returns what was reserved, for :meth:`release`.
        ``free_need``: the bytes that must be free on the device beside others (default ``nbytes``; less
        where part of the record's memory is in use already, its cases made by another lane)."""
        began = time.monotonic()
        free_need = nbytes if free_need is None else free_need
        nbytes = max(nbytes, self.budget) if alone else nbytes
        with self._cond:
            at_once = self._cause(nbytes, alone, free_need) is None
            if at_once:
                self.held += nbytes
        if not at_once:
            with self.idle():  # the lane's slot lent meanwhile (taken back with the cond let go)
                self._wait(nbytes, alone, free_need)
        if ledger is not None:
            ledger.wait("memory_wait_s", time.monotonic() - began)
        return nbytes

    def _wait(self, nbytes: int, alone: bool, free_need: int) -> None:
        with self._cond:
            self._alone_waiting += alone
            token = next(self._tokens)
            self._waiting[token] = (time.monotonic(), nbytes)
            try:
                while cause := self._cause(nbytes, alone, free_need, token):
                    if self.stop is not None and self.stop.is_set():
                        raise MemoryWaitStopped()
                    began = time.monotonic()
                    # Memory freed by another process notifies nobody (nor does a stop): read again.
                    self._cond.wait(FREE_POLL_S)
                    self.waits_s[cause] += time.monotonic() - began
            finally:
                self._alone_waiting -= alone
                del self._waiting[token]
            self.held += nbytes
            self._cond.notify_all()  # those kept behind this one may fit now

    def try_acquire(self, nbytes: int) -> int | None:
        """Reserve ``nbytes`` only if they fit beside what is held now and no record waits to run
        alone; None (nothing reserved) else. Never waits."""
        with self._cond:
            if self._alone_waiting or self.held + nbytes + self._aged_bytes(None) > self.budget or (
                    self.held and self.free_bytes is not None and self.free_bytes() < nbytes):
                return None
            self.held += nbytes
            return nbytes

    def release(self, nbytes: int) -> None:
        with self._cond:
            self.held -= nbytes
            self._cond.notify_all()


def memory_budget(device: str, share: float | None = None) -> int:
    """The bytes the records in flight may hold: ``share`` of the device's memory, or of the host's available
    memory on the CPU (by default ``MEMORY_SHARE_CUDA``, ``MEMORY_SHARE_CPU``)."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info()[1] * (MEMORY_SHARE_CUDA if share is None else share))
    from solbench.engine.cases import available_memory

    return int(available_memory("cpu") * (MEMORY_SHARE_CPU if share is None else share))


def compact_allocator() -> None:
    """The parent's CUDA allocator maps its segments in pieces (expandable segments), so that emptying its
    cache gives back every free piece; a whole segment stays held while one block of it lives. H200,
    2026-12-02: the parent held ~82 GiB of 140 with small records in flight (twelve lanes' replies and
    bursts copied out, sizes of every kind), and the records beside it ran out, waited and ran again alone.
    The parent's setting only: the workers, whose allocations the candidates make, keep torch's default."""
    import torch

    # torch >= 2.10 names it per accelerator (the CUDA one warns that it is deprecated)
    setting = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
    try:
        setting("expandable_segments:True")
    except (AttributeError, RuntimeError):  # a torch without the setting: its allocator as it is
        pass


def free_bytes_of(device: str) -> Callable[[], int] | None:
    """What reads the device's free memory now (every process's use counted); None off CUDA (the host's
    memory is the records' own estimate's business there)."""
    if not device.startswith("cuda"):
        return None
    import torch

    index = torch.device(device).index

    def free() -> int:
        return int(torch.cuda.mem_get_info(index)[0])

    return free


@dataclass
class _Entry:
    remaining: int
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None
    nbytes: int = 0


class CasesCache:
    """What a (problem, workload) needs (inputs, reference outputs, roofline point), made once for
    the lanes that expect it and dropped when the last of them has taken it.

    Kept for the later lanes only within ``cap_bytes`` (``size(value)`` each): past it a later lane
    makes its own (the same values: the seeds are the run's). A lane waiting for one being made
    takes it either way. One that failed is not kept: the next lane to ask makes it again."""

    def __init__(self, cap_bytes: int = 1 << 62, size: Callable[[Any], int] = lambda value: 0) -> None:
        self._lock = threading.Lock()
        self._expected: dict[tuple[str, str], int] = {}
        self._entries: dict[tuple[str, str], _Entry] = {}
        self.cap_bytes, self._size, self.kept_bytes = cap_bytes, size, 0

    def expect(self, lanes: list[Lane]) -> None:
        """Count the lanes that will take each (problem, workload)."""
        with self._lock:
            for lane in lanes:
                for w in lane.workloads:
                    key = (lane.problem.name, w.name)
                    self._expected[key] = self._expected.get(key, 0) + 1

    def take(self, problem: Problem, workload: Workload, make: Callable[[], Any]) -> Any:
        """The value for (problem, workload): made here by the first lane to ask, awaited by the others."""
        key = (problem.name, workload.name)
        with self._lock:
            entry = self._entries.get(key)
            mine = entry is None
            if entry is None:
                entry = self._entries[key] = _Entry(max(self._expected.pop(key, 1), 1))
        if mine:
            try:
                entry.value = make()
                self._keep(key, entry)
            except BaseException as err:
                entry.error = err
                self._forget(key, entry)
                raise
            finally:
                entry.done.set()
                self._drop(key, entry)
            return entry.value
        entry.done.wait()
        self._drop(key, entry)
        if entry.error is not None:
            raise entry.error
        return entry.value

    def holds(self, problem: Problem, workload: Workload) -> bool:
        """Whether a value for (problem, workload) is kept or being made (a lane asking now takes it)."""
        with self._lock:
            return (problem.name, workload.name) in self._entries

    def skip(self, problem: Problem, workloads: list[Workload]) -> None:
        """A lane that ends early will not take these: the others need not keep them for it."""
        for w in workloads:
            key = (problem.name, w.name)
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    left = self._expected.get(key, 0) - 1
                    if left > 0:
                        self._expected[key] = left
                    else:
                        self._expected.pop(key, None)
                    continue
            self._drop(key, entry)

    def _keep(self, key: tuple[str, str], entry: _Entry) -> None:
        """Count a new value against the cap, or forget it (later lanes make their own)."""
        nbytes = self._size(entry.value) if entry.remaining > 1 else 0
        with self._lock:
            if self.kept_bytes + nbytes <= self.cap_bytes:
                entry.nbytes = nbytes
                self.kept_bytes += nbytes
                return
        self._forget(key, entry)

    def _forget(self, key: tuple[str, str], entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]
                self.kept_bytes -= entry.nbytes

    def _drop(self, key: tuple[str, str], entry: _Entry) -> None:
        with self._lock:
            entry.remaining -= 1
            if entry.remaining <= 0 and self._entries.get(key) is entry:
                del self._entries[key]
                self.kept_bytes -= entry.nbytes

    def __len__(self) -> int:
        return len(self._entries)


def _run_in_order(lanes: list[Lane], run: Callable[[Lane], None], stop: threading.Event,
                  started: Callable[[int], None]) -> None:
    """One lane at a time, on this thread, until ``stop`` is set."""
    for i, lane in enumerate(lanes):
        if stop.is_set():
            return
        started(i)
        run(lane)


@contextmanager
def quick_handoffs() -> Iterator[None]:
    """The interpreter's switch interval at ``LANE_SWITCH_INTERVAL_S`` while lanes run (restored after): a
    lane back from its worker inside a timing window waits that long at most for the GIL, not 5 ms."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, LANE_SWITCH_INTERVAL_S))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_lanes(lanes: list[Lane], run: Callable[[Lane], None], in_flight: int, stop: threading.Event,
              started: Callable[[int], None] = lambda i: None, slots: LaneSlots | None = None) -> None:
    """Run ``run(lane)`` for every lane, ``in_flight`` at a time on threads, in order of start;
    ``started(i)`` is told when lane ``i`` starts (to start workers ahead for those after it). The
    first error stops the lanes not yet started and is raised here once the running ones end.
    ``slots``: ``in_flight`` lanes at work, and up to ``SPARE_LANES`` more threads take the slots that
    lanes waiting for memory lend (:class:`LaneSlots`)."""
    if in_flight <= 1:
        _run_in_order(lanes, run, stop, started)
        return
    lock = threading.Lock()
    cursor = iter(range(len(lanes)))
    errors: list[BaseException] = []
    working = slots.working if slots is not None else nullcontext

    def serve() -> None:
        while not stop.is_set():
            with working():
                with lock:
                    i = next(cursor, None) if not stop.is_set() else None
                    if i is not None:
                        started(i)
                if i is None:
                    return
                try:
                    run(lanes[i])
                except BaseException as err:  # the run's end: raised by the caller's thread
                    errors.append(err)
                    stop.set()

    spare = min(SPARE_LANES, in_flight // 2) if slots is not None else 0
    threads = [threading.Thread(target=serve, name=f"lane-{n}", daemon=True) for n in range(in_flight + spare)]
    with quick_handoffs():
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)  # short waits: signals reach this (main) thread
        finally:
            stop.set()
    if errors:
        raise errors[0]
