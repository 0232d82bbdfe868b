"""The device gate: untimed device work shares the device; a timing window has it to itself.

A reader-writer discipline the parent owns, one gate per device of a run. Every request that may
touch the device (a worker's load, setup, correctness call, the parent's own inputs, reference
outputs and checks) holds it shared: any number of them at once. A timing request holds it
exclusive: no other solbench request on that device starts or runs while it is timed. On the CPU
the same gate makes a timing window exclude every other worker request (the cores are the device).

Writer-preferring, so timings are not starved: while a timing waits, new untimed requests wait
too, but for one case: while a *long* request (a load or first call, which may compile for
seconds) that cannot be locked is in flight, the timing waits for it anyway, so short requests
still start meanwhile (they end before it, or soon after). A new long request starts then only within
``GATE_LONG_JOIN_S`` of the first waiting timing (so compiles bunch up instead of following each other,
each holding the timings back); later it waits for the timings. With ``fair`` (phase-fair), a request
that waited through a whole window starts before the next timing may (so untimed work is not starved
either: for a gate whose timings need not drain it, without batches); with ``slice_s`` the next timing
also waits that long after a window (the untimed work in flight runs on the device meanwhile).

The driver's lock (``lock``, :mod:`solbench.engine.cudalock`): a request whose parent thread only awaits
another process's reply (a worker's, a problem host's: :meth:`DeviceGate.awaiting_worker`) holds no
timing back. The timing locks that process (the driver blocks its CUDA calls and drains its submitted
work) for the window and unlocks it after; the parent's thread waits for the unlock before it touches
the device again. A timing waits only for the parent's own device work in flight, and for a process the
driver would not lock. H200, 2026-12-03 (call 22): with only long requests lockable, timings waited for
rounds that recompiled (up to 26 s), and every lane waited behind them: windows held the device 22% of
the run.

Timings in batches: a timing must wait for the untimed requests in flight to end (the drain),
and the device idles meanwhile. With ``batch`` > 1, untimed requests keep starting while fewer
than ``batch`` timings wait, for at most ``max_delay_s`` after the first began to wait; then the
gate closes to them, drains once, and the waiting timings run one after another. The drain is
paid once per batch instead of once per timing; no timing waits longer than ``max_delay_s`` plus
one drain plus the timings ahead of it. An ``urgent`` one (a burst, which follows its own timing
window moments later) makes the batch due at once: it waits for the drain only.

While a timing window is held, ``pause(pid)`` (set by the run) stops the run's other workers that
hold a candidate (on the CPU all of them), and what it returns resumes them after the window: no
other candidate's code runs during a timing, not even a thread it left behind between its requests.

A holder that must wait for something else mid-request (a problem host busy with another lane's
cases) steps out (:meth:`DeviceGate.stepped_out`): its shared hold is let go for the wait and taken
again after, so no timing waits on a wait that is not device work. Its interval is logged in pieces.

Every request's interval is logged (owner, kind, worker pid, start, end), parent side, so a test
can prove that no other item's device work overlaps a timing window (:func:`overlaps`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from solbench.settings import GATE_LOCKS_AT_ONCE, GATE_LONG_JOIN_S

MAX_INTERVALS = 200_000  # a long run keeps its latest requests' intervals only
LOCK_THREADS = 16  # the most processes locked at once (lock_at_once)


class WaitSink(Protocol):
    """Where the time spent waiting for the gate is charged (a record's :class:`~solbench.engine.ledger.Ledger`)."""

    def wait(self, name: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class Interval:
    """One request that held the gate: whose (``owner``, the item), what, by which worker, when."""

    owner: str
    kind: str
    start: float
    end: float
    exclusive: bool
    pid: int | None = None  # the worker's process; None: the parent's own work


@dataclass(eq=False)
class _Hold:
    """A thread's shared hold in progress: what is logged when it ends, and since when it is held (``locked``:
    its worker is locked for a timing window, the piece before logged; ``awaited``: the process whose reply its thread awaits now, None when it awaits none)."""

    what: Interval
    long: bool
    start: float
    sink: WaitSink | None
    locked: bool = False
    awaited: int | None = None
    locked_at: float = 0.0  # when its process was locked (the time locked is charged to its sink as a wait)


Unlock = Callable[[], bool]


class DeviceGate:
    """Shared for untimed device work, exclusive for a timing window (see the module docstring).

    ``enabled=False`` grants every request at once (the control that shows what the gate prevents);
    the intervals are logged either way.
    """

    def __init__(self, enabled: bool = True, batch: int = 1, max_delay_s: float = 0.0, slice_s: float = 0.0,
                 fair: bool = False):
        self.enabled, self.fair = enabled, fair
        self.batch, self.max_delay_s, self.slice_s = max(1, batch), max(0.0, max_delay_s), max(0.0, slice_s)
        self._cond = threading.Condition()
        self._readers = 0
        self._long = 0  # long readers in flight
        self._writer = False
        self._writers_waiting = 0
        self._urgent_waiting = 0
        self._first_waiting = 0.0  # when the oldest waiting timing began to wait
        self._closed = False  # closed to new untimed requests until the waiting timings are done
        self._windows_done = 0  # timing windows ended so far (a request that waited through one goes first)
        self._last_window_end = float("-inf")
        # Stops the other workers for a timing window (given the timed worker's pid); returns their resume.
        self.pause: Callable[[int | None], Callable[[], None]] | None = None
        # Locks a worker's CUDA work, drained by the driver (solbench.engine.cudalock): its unlock, or None.
        self.lock: Callable[[int], Unlock | None] | None = None
        self._awaiting: list[_Hold] = []  # holds whose thread only awaits another process: a timing may lock it
        self.locks = self.lock_failures = self.unlock_failures = 0
        self.lock_s = 0.0  # spent in the driver's lock calls (exclusive time, outside the windows' own)
        self.lock_at_once = GATE_LOCKS_AT_ONCE  # the processes locked from threads at once, not one by one
        # Processes the driver refused once: never asked again (a timing waits for their requests). H200 call 23:
        # asked again at every window, 333 refusals (code 801) each unlocked the others and waited.
        self._refused_pids: set[int] = set()
        self.refused_kinds: Counter[str] = Counter()  # the refused holds' kinds ("round", "round*": long, ...)
        self._lockers: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._local = threading.local()  # this thread's shared hold (a _Hold), while it has one
        self.intervals: list[Interval] = []
        # Seconds the holders waited, by cause: a timing for its window ("timing"), untimed work for the gate
        # ("untimed"), a hold whose process was locked for another's window ("locked"): what ``device_wait_s`` sums.
        self.waits_s = {"timing": 0.0, "untimed": 0.0, "locked": 0.0}

    def _may_read(self, long: bool, seen: int) -> bool:
        if self._writer:
            return False
        if self._writers_waiting == 0 or (self.fair and self._windows_done > seen):
            return True  # no timing waits, or (fair) this request waited through a whole window: its turn
        if self._unlockable_long() and (not long or time.monotonic() - self._first_waiting < GATE_LONG_JOIN_S):
            return True  # the timing waits for a long request anyway
        return not self._due()

    def _lockable(self) -> list[_Hold]:
        """The holds in flight a timing may lock (their thread awaits a process the driver has not refused)."""
        if self.lock is None:
            return []
        return [h for h in self._awaiting if h.awaited not in self._refused_pids]

    def _unlockable_long(self) -> bool:
        """Whether a long request in flight is one a timing cannot lock now (it waits for that one to end
        anyway; the others it locks once the parent's own device work in flight has ended, so new ones wait)."""
        return self._long > sum(1 for h in self._lockable() if h.long)

    def _due(self) -> bool:
        """Whether the waiting timings' batch is due (then the gate stays closed until they are done). A batch
        saves drains: it is due at once when the timing needs none (every request in flight can be locked)."""
        if not self._closed and (self._writers_waiting >= self.batch or self._urgent_waiting
                                 or time.monotonic() - self._first_waiting >= self.max_delay_s
                                 or (self._readers and self._readers == len(self._lockable()))):
            self._closed = True
        return self._closed

    @contextmanager
    def shared(self, owner: str, kind: str, *, long: bool = False, pid: int | None = None,
               sink: WaitSink | None = None) -> Iterator[None]:
        """Hold the gate shared: untimed device work (``long``: a load or first call that may compile)."""
        waited = time.monotonic()
        hold = _Hold(Interval(owner, kind, 0.0, 0.0, False, pid), long, 0.0, sink)
        self._enter_shared(hold)
        hold.start = time.monotonic()
        self._charge(sink, "untimed", hold.start - waited)
        outer, self._local.hold = getattr(self._local, "hold", None), hold
        try:
            yield
        finally:
            self._local.hold = outer
            self._leave_shared(hold)

    def _enter_shared(self, hold: _Hold) -> None:
        with self._cond:
            seen = self._windows_done
            while self.enabled and not self._may_read(hold.long, seen):
                self._cond.wait()
            self._readers += 1
            self._long += hold.long

    def _leave_shared(self, hold: _Hold) -> None:
        end = time.monotonic()
        with self._cond:
            self._readers -= 1
            self._long -= hold.long
            self._cond.notify_all()
        self._log(dataclasses.replace(hold.what, start=hold.start, end=end))

    @contextmanager
    def awaiting_worker(self, pid: int | None = None) -> Iterator[None]:
        """While this thread's hold only waits for the reply of process ``pid`` (default: the hold's worker;
        this process does no device work meanwhile), a timing may lock that process (its device work drained
        by the driver) instead of waiting for the request to end. On the way out the thread waits for the
        unlock, before any device work of its own (reading the reply out of the device pool)."""
        hold = getattr(self._local, "hold", None)
        pid = pid if pid is not None or hold is None else hold.what.pid
        if hold is None or pid is None or self.lock is None:
            yield
            return
        with self._cond:
            hold.awaited = pid
            self._awaiting.append(hold)
            self._cond.notify_all()  # a timing may be waiting for just this
        try:
            yield
        finally:
            with self._cond:
                while hold.locked:
                    self._cond.wait()
                self._awaiting = [h for h in self._awaiting if h is not hold]
                hold.awaited = None

    def held_here(self) -> bool:
        """Whether the calling thread holds the gate (shared or alone): device work may run now."""
        return getattr(self._local, "hold", None) is not None or getattr(self._local, "alone", False)

    @contextmanager
    def stepped_out(self) -> Iterator[None]:
        """While this thread waits for something that is not device work, its shared hold (if any) is
        let go, and taken again after (the wait charged to its sink): a timing does not wait on it."""
        hold = getattr(self._local, "hold", None)
        if hold is None:
            yield
            return
        self._leave_shared(hold)
        try:
            yield
        finally:
            waited = time.monotonic()
            self._enter_shared(hold)
            hold.start = time.monotonic()
            self._charge(hold.sink, "untimed", hold.start - waited)

    @contextmanager
    def exclusive(self, owner: str, kind: str = "time", *, pid: int | None = None,
                  sink: WaitSink | None = None, urgent: bool = False) -> Iterator[None]:
        """Hold the gate alone: a timing window (``urgent``: without waiting for a batch)."""
        waited = time.monotonic()
        with self._cond:
            if self._writers_waiting == 0:
                self._first_waiting = waited
            self._writers_waiting += 1
            self._urgent_waiting += urgent
        try:
            locked = self._wait_alone()
        finally:
            with self._cond:
                self._writers_waiting -= 1
                self._urgent_waiting -= urgent
                if self._writers_waiting == 0:
                    self._closed = False

        resume = self.pause(pid) if self.pause is not None and self.enabled else None

        def leave() -> None:  # the others run again and are unlocked before another timing may start (and lock)
            if resume is not None:
                resume()
            self._unlock(locked)
            self._writer = False
            self._windows_done += 1
            self._last_window_end = time.monotonic()

        self._local.alone = True
        try:
            with self._held(Interval(owner, kind, 0.0, 0.0, True, pid), waited, sink, leave):
                yield
        finally:
            self._local.alone = False

    def _wait_alone(self) -> list[tuple[list[_Hold], Unlock]]:
        """Wait until the gate is this timing's alone: no untimed request in flight, or only those whose
        processes the driver has locked for it (their unlocks returned). A hold that cannot be locked is
        waited for."""
        while True:
            with self._cond:
                while self.enabled and (self._sliced() or ((self._writer or self._readers)
                                                           and not self._only_lockable())):
                    self._cond.wait(self._until_due())
                self._writer = True
                holds = list(self._awaiting) if self.enabled and self._readers else []
                for hold in holds:  # claimed: its thread stays off the device until this window's unlock
                    hold.locked = True
            locked = self._lock_holds(holds)
            if locked is not None:
                return locked
            with self._cond:  # one could not be locked (marked now): wait for it to end, as without locks
                self._writer = False
                self._cond.notify_all()

    def _only_lockable(self) -> bool:
        """Every request in flight awaits a process not yet refused a lock, and the batch is due."""
        return (self.lock is not None and not self._writer and self._readers == len(self._lockable())
                and (self._closed or self._due()))

    def _sliced(self) -> bool:
        """Whether the untimed work's slice after the last window still runs (no timing starts meanwhile)."""
        return time.monotonic() - self._last_window_end < self.slice_s

    def _lock_holds(self, holds: list[_Hold]) -> list[tuple[list[_Hold], Unlock]] | None:
        """Each awaited process locked once (the pieces of its holds before the lock logged); None, the holds
        marked and those locked so far unlocked, when one cannot be."""
        by_pid: dict[int, list[_Hold]] = {}
        for hold in holds:
            assert hold.awaited is not None
            by_pid.setdefault(hold.awaited, []).append(hold)
        began = time.monotonic()
        unlocks = dict(zip(by_pid, self._locked(list(by_pid)), strict=True))
        self.lock_s += time.monotonic() - began
        done = [(by_pid[pid], unlock) for pid, unlock in unlocks.items() if unlock is not None]
        refused = [pid for pid, unlock in unlocks.items() if unlock is None]
        if refused:
            self._refused(refused, [h for pid in refused for h in by_pid[pid]], done, holds)
            return None
        now = time.monotonic()
        for group, _ in done:
            for hold in group:
                hold.locked_at = now
                self._log(dataclasses.replace(hold.what, start=hold.start, end=now))
        self.locks += len(done)
        return done

    def _locked(self, pids: list[int]) -> list[Unlock | None]:
        """Each process locked (its unlock, or None where refused): one after another, or at once from threads
        (``lock_at_once``; each lock waits for that process's submitted work to drain)."""
        lock = self.lock
        if lock is None or not pids:
            return []
        if not self.lock_at_once or len(pids) < 2:
            return [lock(pid) for pid in pids]
        if self._lockers is None:
            self._lockers = concurrent.futures.ThreadPoolExecutor(LOCK_THREADS, thread_name_prefix="gate-lock")
        return list(self._lockers.map(lock, pids))

    def _refused(self, pids: list[int], group: list[_Hold], done: list[tuple[list[_Hold], Unlock]],
                 holds: list[_Hold]) -> None:
        """Processes the driver would not lock: never asked again (their holds, ``group``, waited for from now),
        the others unlocked and let go as they were."""
        self.lock_failures += len(pids)
        self.refused_kinds.update(h.what.kind + "*" * h.long for h in group)
        self._unlock(done)
        with self._cond:
            self._refused_pids.update(pids)
            for hold in holds:
                hold.locked = False
            self._cond.notify_all()

    def _unlock(self, locked: list[tuple[list[_Hold], Unlock]]) -> None:
        """Each process unlocked; its holds go on (logged from now) and their threads may touch the device again.
        The time each hold was locked is charged to its sink as ``device_wait_s`` (off its record's work clock)."""
        for group, unlock in locked:
            if not unlock():
                self.unlock_failures += 1
            with self._cond:
                now = time.monotonic()
                for hold in group:
                    if hold.locked_at:
                        self._charge(hold.sink, "locked", now - hold.locked_at)
                    hold.start, hold.locked, hold.locked_at = now, False, 0.0
                self._cond.notify_all()

    def _until_due(self) -> float | None:
        """How long a waiting timing sleeps before it closes the gate itself (the batch's delay), or before the
        untimed work's slice ends."""
        if self._sliced():
            return max(self._last_window_end + self.slice_s - time.monotonic(), 0.0)
        if self._closed or self._due():
            return None
        left = self._first_waiting + self.max_delay_s - time.monotonic()
        if left <= 0:
            self._closed = True
            return None
        return left

    @contextmanager
    def _held(self, what: Interval, waited: float, sink: WaitSink | None, leave: Callable[[], None]) -> Iterator[None]:
        """The hold itself: the wait charged to ``sink``, the gate left (``leave``) and the interval logged."""
        start = time.monotonic()
        self._charge(sink, "timing", start - waited)
        try:
            yield
        finally:
            end = time.monotonic()
            with self._cond:
                leave()
                self._cond.notify_all()
            self._log(dataclasses.replace(what, start=start, end=end))

    def _charge(self, sink: WaitSink | None, cause: str, seconds: float) -> None:
        """A holder's wait: to its record (``device_wait_s``) and to the gate's totals by cause."""
        if sink is not None:
            sink.wait("device_wait_s", seconds)
        with self._lock:
            self.waits_s[cause] += max(seconds, 0.0)

    def _log(self, interval: Interval) -> None:
        with self._lock:
            if len(self.intervals) >= MAX_INTERVALS:
                del self.intervals[: MAX_INTERVALS // 2]
            self.intervals.append(interval)


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    """(timing window, other request) pairs where any other request overlapped a timing window
    (``o.start < w.end and w.start < o.end``), in the order of ``intervals``. A sweep over the starts and
    ends: a run's summary asks after every record, and pairing every window with every hold grew with
    the square of the run (H200 call 28: half the parent's GIL time at 200 records)."""
    events = sorted([(i.end, 0, n) for n, i in enumerate(intervals)] + [(i.start, 1, n) for n, i in enumerate(intervals)])
    active: dict[int, Interval] = {}  # started, not yet ended (an end at t comes before a start at t)
    windows: dict[int, Interval] = {}
    pairs: list[tuple[int, int]] = []
    for _, starts, n in events:
        i = intervals[n]
        if not starts:
            active.pop(n, None)
            windows.pop(n, None)
            continue
        pairs += [(w, n) for w, iw in windows.items() if _meet(iw, i)]  # windows in flight: it starts inside
        if i.exclusive:
            pairs += [(n, o) for o, io in active.items() if _meet(i, io)]  # a window starting inside requests
        if i.end > i.start:
            active[n] = i
            if i.exclusive:
                windows[n] = i
    return [(intervals[w], intervals[o]) for w, o in sorted(set(pairs))]


def _meet(a: Interval, b: Interval) -> bool:
    return a.start < b.end and b.start < a.end
