"""The pipelined schedule: lanes in flight together, timing windows alone, shared inputs, accounted walls."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import solbench
from solbench.data.problem import load_problem
from solbench.engine import gate as gate_module
from solbench.engine.gate import DeviceGate, Interval, overlaps
from solbench.engine.identity import RunIdentity
from solbench.engine.ledger import PHASES, Ledger, phase_total
from solbench.engine.pipeline import CasesCache, Lane
from solbench.engine.runner import PlanItem, Runner
from solbench.errors import DeviceMemoryShort, ProblemError
from solbench.worker.candidate import describe_candidates

HERE = Path(__file__).resolve().parents[1]
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"


# --- the gate on its own -----------------------------------------------------------------------

def _hold(gate: DeviceGate, owner: str, exclusive: bool, seconds: float, long: bool = False) -> threading.Thread:
    def body() -> None:
        ctx = gate.exclusive(owner) if exclusive else gate.shared(owner, "call", long=long)
        with ctx:
            time.sleep(seconds)

    t = threading.Thread(target=body)
    t.start()
    return t


_EDGES = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])  # few values: shared ends, touching and empty intervals


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_EDGES, _EDGES, st.booleans()), max_size=14))
def test_overlaps_finds_exactly_the_pairs_that_share_time(raw):
    """The sweep against the definition, pair by pair (touching intervals and empty ones do not overlap)."""
    intervals = [Interval(f"i{n}", "call", min(a, b), max(a, b), alone) for n, (a, b, alone) in enumerate(raw)]
    expected = [(w, o) for w in intervals if w.exclusive for o in intervals
                if o is not w and o.start < w.end and w.start < o.end]
    assert overlaps(intervals) == expected


@pytest.mark.parametrize("enabled", [True, False])
def test_a_timing_window_excludes_every_other_request_unless_the_gate_is_off(enabled):
    gate = DeviceGate(enabled=enabled)
    threads = [_hold(gate, "reader-a", False, 0.15)]
    time.sleep(0.02)
    threads.append(_hold(gate, "timer", True, 0.1))  # waits for reader-a when the gate is on
    time.sleep(0.02)
    threads.append(_hold(gate, "reader-b", False, 0.05))  # arrives while the timing waits: after it
    for t in threads:
        t.join()
    found = overlaps(gate.intervals)
    if enabled:
        assert found == []
        by = {i.owner: i for i in gate.intervals}
        assert by["timer"].start >= by["reader-a"].end  # it waited for the request in flight
        assert by["reader-b"].start >= by["timer"].end  # writer-preferring: the later request waited
    else:
        assert {(w.owner, o.owner) for w, o in found} >= {("timer", "reader-a"), ("timer", "reader-b")}


def test_a_holder_waiting_for_something_else_steps_out_and_the_timing_goes_first():
    """A lane that holds the gate shared and then waits for a busy problem host lets the gate go for
    the wait: the waiting timing runs meanwhile, and the lane's hold is logged in two pieces, neither
    inside the window."""
    gate = DeviceGate()
    host_free = threading.Event()
    steps = []

    def lane() -> None:
        with gate.shared("lane", "recheck"):
            steps.append("compared")
            with gate.stepped_out():
                host_free.wait(2.0)  # the host serves another lane meanwhile
            steps.append("referenced")

    t = threading.Thread(target=lane)
    t.start()
    time.sleep(0.05)
    timer = _hold(gate, "timer", True, 0.05)
    timer.join(1.0)
    assert not timer.is_alive(), "the timing waited for the lane's wait"
    host_free.set()
    t.join()
    assert steps == ["compared", "referenced"]
    pieces = [i for i in gate.intervals if i.owner == "lane"]
    window = next(i for i in gate.intervals if i.owner == "timer")
    assert len(pieces) == 2 and overlaps(gate.intervals) == []
    assert pieces[0].end <= window.start and pieces[1].start >= window.end


def test_stepping_out_without_a_hold_is_a_plain_wait():
    gate = DeviceGate()
    with gate.stepped_out():
        pass
    with gate.exclusive("timer"), gate.stepped_out():  # a window is never let go
        pass
    assert [i.owner for i in gate.intervals] == ["timer"]


def test_short_requests_go_on_while_a_timing_waits_for_a_long_one(monkeypatch):
    monkeypatch.setattr(gate_module, "GATE_LONG_JOIN_S", 0.1)
    gate = DeviceGate()
    threads = [_hold(gate, "compile", False, 0.4, long=True)]
    time.sleep(0.02)
    threads.append(_hold(gate, "timer", True, 0.05))
    time.sleep(0.02)
    threads.append(_hold(gate, "short", False, 0.02))  # the timing waits for the compile anyway
    threads.append(_hold(gate, "long-early", False, 0.02, long=True))  # joins the compile in flight
    time.sleep(0.15)
    threads.append(_hold(gate, "long-late", False, 0.02, long=True))  # past the join window: after the timing
    for t in threads:
        t.join()
    by = {i.owner: i for i in gate.intervals}
    assert by["short"].end <= by["timer"].start and by["long-early"].end <= by["timer"].start
    assert by["long-late"].start >= by["timer"].end
    assert overlaps(gate.intervals) == []


class _FakeLocks:
    """The driver's process lock as the gate sees it: records each lock and unlock (``refuse``: none taken)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse, self.events = refuse, []

    def __call__(self, pid: int):
        self.events.append(("lock", pid, time.monotonic()))
        if self.refuse:
            return None

        def unlock() -> bool:
            self.events.append(("unlock", pid, time.monotonic()))
            return True

        return unlock


def _compile(gate: DeviceGate, done: threading.Event, left: list[float], awaiting: bool = True) -> threading.Thread:
    """A worker's long request (pid 111) waiting for its reply until ``done``: the parent's side awaits it
    (``awaiting``) or works on the device meanwhile; ``left`` gets when the thread went on after the wait."""
    def body() -> None:
        with gate.shared("compile", "round", long=True, pid=111):
            with gate.awaiting_worker() if awaiting else contextlib.nullcontext():
                done.wait(5)
            left.append(time.monotonic())
            time.sleep(0.02)  # the reply read out of the device pool: the parent's device work

    t = threading.Thread(target=body)
    t.start()
    return t


def test_a_timing_locks_a_worker_awaited_by_a_long_request_instead_of_waiting_for_it():
    """A timing does not wait for another worker's compile: the driver locks that worker (its device work
    drained) for the window; the request's thread, once its reply is in, waits for the unlock before it
    touches the device; the hold's pieces lie outside the window."""
    gate, locks, done, left = DeviceGate(), _FakeLocks(), threading.Event(), []
    gate.lock = locks
    worker = _compile(gate, done, left)
    time.sleep(0.05)
    with gate.exclusive("timer", pid=222):
        began = time.monotonic()
        done.set()  # the reply arrives inside the window
        time.sleep(0.05)
        ended = time.monotonic()
    worker.join()
    (lock, pid, locked_at), (unlock, _, unlocked_at) = locks.events
    assert (lock, pid, unlock) == ("lock", 111, "unlock") and locked_at < began and unlocked_at >= ended
    assert left[0] >= unlocked_at, "off the device until unlocked"
    assert gate.locks == 1 and gate.lock_failures == 0
    assert overlaps(gate.intervals) == []
    assert [i.kind for i in gate.intervals if i.owner == "compile"] == ["round", "round"]  # before and after


def test_short_requests_wait_while_a_timing_can_lock_the_long_one_and_timings_in_a_row_each_lock_it():
    """With the long request in flight lockable, short requests arriving while timings wait do not start (they
    would hold the timings back: H200 call 21, every compile gap stayed); two timings in a row each lock the
    worker, the first unlocking it before the second may start (else the second found it locked, was refused and
    waited for the whole compile)."""
    gate, locks, done, left = DeviceGate(batch=2, max_delay_s=0.05), _FakeLocks(), threading.Event(), []
    gate.lock = locks
    worker = _compile(gate, done, left)
    time.sleep(0.05)
    timers = [_hold(gate, f"timer{n}", True, 0.03) for n in range(2)]
    time.sleep(0.01)
    short = _hold(gate, "short", False, 0.02)
    for t in [*timers, short]:
        t.join()
    done.set()
    worker.join()
    by = {i.owner: i for i in gate.intervals}
    assert by["short"].start >= min(by["timer0"].end, by["timer1"].end), "the short request waited for a timing"
    assert [e[0] for e in locks.events] == ["lock", "unlock", "lock", "unlock"] and gate.lock_failures == 0
    assert max(by["timer0"].end, by["timer1"].end) < left[0], "both windows ran while the compile was in flight"
    assert overlaps(gate.intervals) == []


def test_a_timing_that_needs_no_drain_waits_for_no_batch():
    """Batches save drains; with every request in flight lockable a timing needs none, so it runs at once."""
    gate, locks, done, left = DeviceGate(batch=6, max_delay_s=5.0), _FakeLocks(), threading.Event(), []
    gate.lock = locks
    worker = _awaiting(gate, "round", 111, done, left)
    time.sleep(0.05)
    asked = time.monotonic()
    with gate.exclusive("timer", pid=222):
        began = time.monotonic()
    done.set()
    worker.join()
    assert began - asked < 0.1 and [e[0] for e in locks.events] == ["lock", "unlock"]
    assert overlaps(gate.intervals) == []


def test_the_time_a_request_was_locked_is_charged_to_its_record_as_a_wait_for_the_device():
    """A record whose worker was locked for another's window waited for the device that long: its ledger says so
    (device_wait_s, off its work clock), so its phases still add up to its wall."""
    gate, locks, done = DeviceGate(), _FakeLocks(), threading.Event()
    gate.lock = locks
    ledger = Ledger()

    def body() -> None:
        with gate.shared("round", "round", pid=111, sink=ledger), ledger.phase("rounds_s"):
            with gate.awaiting_worker():
                done.wait(5)

    worker = threading.Thread(target=body)
    worker.start()
    time.sleep(0.05)
    with gate.exclusive("timer", pid=222):
        w0 = time.monotonic()
        time.sleep(0.2)
        window_s = time.monotonic() - w0
    done.set()
    worker.join()
    # The window's own length bounds the wait (a loaded box may stretch the sleep, never shorten it).
    assert 0.19 <= ledger.phases["device_wait_s"] <= window_s + 0.05, window_s
    assert ledger.phases["rounds_s"] + ledger.phases["device_wait_s"] == pytest.approx(ledger.wall(), abs=0.02)


def test_the_gate_totals_each_wait_by_its_cause_and_they_sum_to_what_the_records_were_charged():
    """A timing that waited for an untimed request ("timing"), a request that waited through the window ("untimed")
    and one whose worker was locked for it ("locked"): each counted once in ``waits_s``, and together they are the
    ``device_wait_s`` charged to the records."""
    gate, locks, done = DeviceGate(), _FakeLocks(), threading.Event()
    gate.lock = locks
    locked, blocked, timed = Ledger(), Ledger(), Ledger()

    def awaited() -> None:
        with gate.shared("round", "round", pid=111, sink=locked), gate.awaiting_worker():
            done.wait(5)

    def check() -> None:  # the parent's own device work: it cannot be locked, the timing waits for it
        with gate.shared("check", "check", sink=blocked):
            time.sleep(0.1)

    first, second = threading.Thread(target=awaited), threading.Thread(target=check)
    first.start()
    second.start()
    time.sleep(0.02)
    with gate.exclusive("timer", pid=222, sink=timed):
        later = Ledger()

        def after() -> None:
            with gate.shared("late", "check", sink=later):
                pass

        late = threading.Thread(target=after)
        late.start()
        time.sleep(0.2)
    done.set()
    for t in (first, second, late):
        t.join()
    waits = gate.waits_s
    assert 0.05 <= waits["timing"] <= 0.15 and timed.phases["device_wait_s"] == pytest.approx(waits["timing"], abs=0.01)
    assert 0.19 <= waits["locked"] <= 0.3 and locked.phases["device_wait_s"] == pytest.approx(waits["locked"], abs=0.01)
    assert 0.17 <= waits["untimed"] <= 0.3 and later.phases["device_wait_s"] == pytest.approx(waits["untimed"], abs=0.01)
    charged = sum(ledger.phases.get("device_wait_s", 0.0) for ledger in (locked, blocked, timed, later))
    assert sum(waits.values()) == pytest.approx(charged)


def test_when_one_of_several_processes_refuses_the_lock_the_others_are_unlocked_and_it_is_waited_for():
    gate, done, left = DeviceGate(), threading.Event(), []

    class Picky(_FakeLocks):
        def __call__(self, pid: int):
            unlock = super().__call__(pid)
            return None if pid == 112 else unlock

    locks = gate.lock = Picky()
    gate.lock_at_once = True
    threads = [_awaiting(gate, "a", 111, done, left), _awaiting(gate, "b", 112, done, left)]
    time.sleep(0.05)
    threading.Timer(0.2, done.set).start()
    with gate.exclusive("timer", pid=222):
        began = time.monotonic()
    for t in threads:
        t.join()
    refused_end = max(i.end for i in gate.intervals if i.owner == "b")
    assert began >= refused_end and gate.lock_failures == 1 and overlaps(gate.intervals) == []
    assert ("unlock", 111) in [(e[0], e[1]) for e in locks.events] and ("unlock", 112) not in [
        (e[0], e[1]) for e in locks.events]


def test_a_process_the_driver_refused_is_not_asked_again_and_its_requests_are_waited_for():
    """H200 call 23: asked again at every window, a process the driver would not lock (code 801) made 333
    refusals, each unlocking the others; once refused it is waited for, never asked again."""
    gate, locks = DeviceGate(), _FakeLocks(refuse=True)
    gate.lock = locks
    for n in range(2):
        done, left = threading.Event(), []
        worker = _awaiting(gate, f"round{n}", 111, done, left)
        time.sleep(0.05)
        threading.Timer(0.1, done.set).start()
        with gate.exclusive(f"timer{n}", pid=222):
            began = time.monotonic()
        worker.join()
        assert began >= left[0]
    assert [e[:2] for e in locks.events] == [("lock", 111)] and gate.refused_kinds == {"round": 1}
    assert overlaps(gate.intervals) == []


@pytest.mark.parametrize("refuse", [True, False])
def test_a_long_request_that_cannot_be_locked_or_is_not_only_awaited_is_waited_for(refuse):
    """A worker the driver does not lock, or a long request whose thread is not only awaiting its reply (it
    may be working on the device), holds the timing back until it ends, as without locks."""
    gate, locks, done, left = DeviceGate(), _FakeLocks(refuse=refuse), threading.Event(), []
    gate.lock = locks
    worker = _compile(gate, done, left, awaiting=refuse)
    time.sleep(0.05)
    threading.Timer(0.2, done.set).start()
    with gate.exclusive("timer", pid=222):
        began = time.monotonic()
    worker.join()
    assert began >= left[0] and overlaps(gate.intervals) == []
    assert [e[0] for e in locks.events] == (["lock"] if refuse else [])
    assert gate.lock_failures == int(refuse) and gate.locks == 0


def _awaiting(gate: DeviceGate, owner: str, pid: int, done: threading.Event, left: list[float],
              host: int | None = None) -> threading.Thread:
    """A short request of worker ``pid`` whose thread only awaits a reply (the worker's, or problem host
    ``host``'s) until ``done``; ``left`` gets when it went on after the wait."""
    def body() -> None:
        with gate.shared(owner, "round", pid=pid):
            with gate.awaiting_worker(host):
                done.wait(5)
            left.append(time.monotonic())

    t = threading.Thread(target=body)
    t.start()
    return t


@pytest.mark.parametrize("at_once", [False, True])
def test_a_timing_locks_every_awaited_process_short_requests_and_problem_hosts_too_each_once(at_once):
    """Any request whose thread only awaits another process holds no timing back: a worker's round, and two
    requests awaiting one problem host (whose process is locked once, unlocked once); one by one or at once."""
    gate, locks, done, left = DeviceGate(), _FakeLocks(), threading.Event(), []
    gate.lock, gate.lock_at_once = locks, at_once
    threads = [_awaiting(gate, "round", 111, done, left), _awaiting(gate, "cases-a", 112, done, left, host=500),
               _awaiting(gate, "cases-b", 113, done, left, host=500)]
    time.sleep(0.05)
    asked = time.monotonic()
    with gate.exclusive("timer", pid=222):
        began = time.monotonic()
        done.set()  # the replies arrive inside the window
        time.sleep(0.05)
        ended = time.monotonic()
    for t in threads:
        t.join()
    assert began - asked < 0.05, "no wait for the requests to end"
    locked = sorted(pid for what, pid, _ in locks.events if what == "lock")
    assert locked == [111, 500] and sorted(pid for what, pid, _ in locks.events if what == "unlock") == [111, 500]
    assert min(left) >= ended and gate.locks == 2 and overlaps(gate.intervals) == []


def test_a_request_that_waited_through_a_window_starts_before_the_next_timing_and_the_slice_is_kept():
    """Phase-fair: timings queued back to back do not starve untimed work (a request that waited through one
    window goes before the next); ``slice_s`` keeps the next window that long after the last."""
    gate = DeviceGate(slice_s=0.05, fair=True)
    threads = [_hold(gate, "timer0", True, 0.05)]
    time.sleep(0.01)
    threads += [_hold(gate, "timer1", True, 0.05), _hold(gate, "timer2", True, 0.05)]
    time.sleep(0.01)
    threads.append(_hold(gate, "short", False, 0.01))
    for t in threads:
        t.join()
    by = {i.owner: i for i in gate.intervals}
    windows = sorted((i for i in gate.intervals if i.exclusive), key=lambda i: i.start)
    assert by["short"].start >= windows[0].end and by["short"].end <= windows[1].start, "between the windows"
    assert all(b.start - a.end >= 0.05 for a, b in itertools.pairwise(windows)), "each slice kept"
    assert overlaps(gate.intervals) == []


def test_the_runs_gate_batches_and_locks_on_cuda_where_the_driver_can_and_unbatched_only_when_asked(monkeypatch):
    from solbench.engine import pipeline

    monkeypatch.setattr(pipeline, "process_locker", lambda: _FakeLocks())
    cuda, cpu = pipeline.device_gate("cuda", 12), pipeline.device_gate("cpu", 12)
    assert cuda.lock is not None and (cuda.batch, cuda.max_delay_s, cuda.slice_s, cuda.fair) == (
        6, pipeline.TIMING_BATCH_DELAY_S, 0.0, False)
    assert cpu.lock is None and (cpu.batch, cpu.max_delay_s) == (6, pipeline.TIMING_BATCH_DELAY_S)
    fair = pipeline.device_gate("cuda", 12, unbatched=True)
    assert fair.lock is not None and (fair.batch, fair.slice_s, fair.fair) == (1, pipeline.GATE_SLICE_S, True)
    monkeypatch.setattr(pipeline, "process_locker", lambda: None)  # a driver without the lock: batches
    assert pipeline.device_gate("cuda", 12, unbatched=True).lock is None
    assert pipeline.device_gate("cuda", 12, unbatched=True).batch == 6


@pytest.mark.parametrize("lend", [True, False])
def test_a_lane_waiting_for_memory_lends_its_slot_to_the_next_lane(lend):
    """Two lanes at work: while lane b waits for the memory lane a holds, lane c runs on a spare thread (its
    slot lent); without slots, c waits for a or b to end."""
    from solbench.engine.pipeline import LaneSlots, MemoryGate, run_lanes

    slots = LaneSlots(2) if lend else None
    memory = MemoryGate(10, idle=slots.idle if slots else contextlib.nullcontext)
    began, at = time.monotonic(), {}

    def run(lane: str) -> None:
        at[lane] = time.monotonic() - began
        if lane == "b":
            time.sleep(0.05)
        held = memory.acquire(10)  # b waits here for a
        time.sleep(0.3 if lane == "a" else 0.01)
        memory.release(held)

    run_lanes(["a", "b", "c"], run, 2, threading.Event(), slots=slots)
    assert (at["c"] < 0.2) == lend


def test_a_record_waiting_for_memory_gives_up_when_the_run_stops():
    """The run's time box (or a failure) stops it: a record still waiting for memory never begins."""
    from solbench.engine.pipeline import MemoryGate, MemoryWaitStopped

    memory, stop, raised = MemoryGate(10), threading.Event(), []
    memory.stop = stop
    held = memory.acquire(10)

    def wait() -> None:
        try:
            memory.acquire(10)
        except MemoryWaitStopped:
            raised.append(time.monotonic())

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.1)
    assert not raised
    stopped = time.monotonic()
    stop.set()
    t.join(2)
    assert raised and raised[0] - stopped < 0.5 and memory.held == held


def _stream(gate: DeviceGate, owner: str, until: float) -> threading.Thread:
    """Untimed requests of 50 ms back to back until ``until``."""
    def body() -> None:
        while time.monotonic() < until:
            with gate.shared(owner, "call"):
                time.sleep(0.05)

    t = threading.Thread(target=body)
    t.start()
    return t


def test_timings_wait_for_their_batch_while_untimed_work_goes_on_then_run_together():
    gate = DeviceGate(batch=2, max_delay_s=0.3)
    began = time.monotonic()
    threads = [_stream(gate, "a", began + 1.2)]
    time.sleep(0.025)
    threads.append(_stream(gate, "b", began + 1.2))  # staggered: some request is always in flight
    time.sleep(0.05)
    threads.append(_hold(gate, "timer", True, 0.05))
    for t in threads:
        t.join()
    window = next(i for i in gate.intervals if i.exclusive)
    waited = window.start - (began + 0.075)
    assert 0.25 < waited < 0.6  # untimed work went on for the batch's delay, then one drain
    assert window.end < began + 1.2  # not starved by the stream
    assert overlaps(gate.intervals) == []
    full = DeviceGate(batch=2, max_delay_s=10.0)  # a second timing fills the batch: no wait for the delay
    threads = [_hold(full, "reader", False, 0.05)]
    time.sleep(0.01)
    threads += [_hold(full, "t1", True, 0.02), _hold(full, "t2", True, 0.02)]
    for t in threads:
        t.join()
    assert max(i.end for i in full.intervals) - min(i.start for i in full.intervals) < 1.0
    assert overlaps(full.intervals) == []


def test_an_urgent_window_waits_for_the_drain_only_not_for_a_batch():
    """A burst (urgent) does not wait for the batch's delay: only for the requests in flight."""
    gate = DeviceGate(batch=4, max_delay_s=5.0)
    reader = _hold(gate, "reader", False, 0.1)
    time.sleep(0.02)
    began = time.monotonic()
    with gate.exclusive("burst", "burst", urgent=True):
        waited = time.monotonic() - began
    reader.join()
    assert waited < 1.0 and overlaps(gate.intervals) == []


def test_the_other_workers_are_paused_for_exactly_the_window():
    gate = DeviceGate()
    events = []

    def pause(timed):
        events.append(("pause", timed, time.monotonic()))
        return lambda: events.append(("resume", timed, time.monotonic()))

    gate.pause = pause
    with gate.shared("r", "call"):
        pass
    with gate.exclusive("t", pid=1234):
        events.append(("timed", None, time.monotonic()))
    assert [e[:2] for e in events] == [("pause", 1234), ("timed", None), ("resume", 1234)]
    window = next(i for i in gate.intervals if i.exclusive)
    assert events[0][2] <= window.start and events[2][2] >= window.end


def test_overlaps_finds_only_what_touches_a_window():
    w = Interval("a", "time", 1.0, 2.0, True)
    before, inside, after = (Interval("b", "call", 0.0, 1.0, False), Interval("c", "call", 1.5, 1.6, False),
                             Interval("d", "call", 2.0, 3.0, False))
    assert overlaps([w, before, inside, after]) == [(w, inside)]


def test_ledger_takes_waits_off_the_work_clock():
    ledger = Ledger()
    with ledger.phase("rounds_s"):
        time.sleep(0.05)  # work
        began = time.monotonic()
        time.sleep(0.2)  # a wait, charged as the gate charges one it measured
        ledger.wait("device_wait_s", time.monotonic() - began)
    assert ledger.phases["device_wait_s"] >= 0.2
    assert 0.045 < ledger.phases["rounds_s"] < 0.2  # the 0.2 s wait counted as work would put it past 0.25
    assert sum(ledger.phases.values()) == pytest.approx(ledger.wall(), abs=0.02)
    assert phase_total(ledger.phases) == pytest.approx(sum(ledger.phases.values()))


# --- inputs and references made once ----------------------------------------------------------

def test_cases_are_made_once_for_every_lane_and_dropped_after_the_last():
    problem = load_problem(TINY / "scaled_add")
    w = problem.workloads[0]
    cands = describe_candidates([CANDIDATES / "honest.py", CANDIDATES / "noisy.py"])
    cache = CasesCache()
    cache.expect([Lane(problem, [w], c) for c in cands])
    made = []
    first = cache.take(problem, w, lambda: made.append(1) or "cases")
    assert len(cache) == 1  # kept for the second lane
    assert cache.take(problem, w, lambda: made.append(2) or "other") == first == "cases"
    assert made == [1] and len(cache) == 0
    cache.expect([Lane(problem, [w], c) for c in cands])
    cache.take(problem, w, lambda: "again")
    cache.skip(problem, [w])  # the other lane ended early
    assert len(cache) == 0


# --- the engine, pipelined, with real workers --------------------------------------------------

def _plan(tmp_path: Path) -> list[PlanItem]:
    other = tmp_path / "honest_b.py"  # a second candidate for scaled_add: they share its inputs
    shutil.copy(CANDIDATES / "honest.py", other)
    add, row = load_problem(TINY / "scaled_add"), load_problem(TINY / "row_write")
    return [PlanItem(add, add.workloads[:2], describe_candidates([CANDIDATES / "honest.py", other])),
            PlanItem(row, row.workloads[:1], describe_candidates([CANDIDATES / "row_write_inplace.py",
                                                                  CANDIDATES / "row_write_copy.py"]))]


def _children() -> list[int]:
    """This process's candidate workers (child processes running solbench.worker), from /proc."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(fields[1]) == me and b"solbench.worker" in command:
                out.append(int(entry.name))
    return out


def _state(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _concurrent(intervals: list[Interval]) -> bool:
    return any(a.owner != b.owner and a.start < b.end and b.start < a.end
               for i, a in enumerate(intervals) for b in intervals[i + 1:])


def _assert_window_parts(records, timed) -> None:
    """Each record's window parts (``harness.window``) lie within its logged timing window and add up to it."""
    for r in records:
        window = r.harness.get("window")
        if window is None:
            continue  # it ended before its timing
        w = next(t for t in timed if t.owner.endswith(f"{r.problem}/{r.workload}/{r.solution}"))
        assert 0.8 * (w.end - w.start) - 0.005 <= window["alone_s"] <= w.end - w.start + 1e-3, (window, w)
        parts = sum(v for k, v in window.items() if k not in ("alone_s", *PIECES_OF_REQUEST))
        assert parts == pytest.approx(window["alone_s"], rel=1e-3, abs=1e-5), window
        assert {"request_s", "burst_s", *PIECES_OF_REQUEST} <= set(window), window
        assert 0 <= window["send_s"] and 0 <= window["read_s"] and window["send_s"] + window["read_s"] <= window[
            "request_s"], window


PIECES_OF_REQUEST = ("send_s", "read_s")  # pieces of request_s, kept beside it


@pytest.mark.slow
@pytest.mark.parametrize("gate_on", [True, False])
def test_no_other_request_runs_inside_a_timing_window(tmp_path, gate_on, monkeypatch):
    """Four lanes, two in flight, workers started in their lanes: with the gate, no request of any
    other item overlaps a timing window; with it off (the control) they do."""
    options = solbench.RunOptions(device="cpu", budget_s=0.2, seed=7, compile_timeout_s=60, workers_ahead=0,
                                  in_flight=2)
    runner = Runner(options, tmp_path / "r.jsonl")
    runner.gate = DeviceGate(enabled=gate_on)
    states: list[list[str]] = []
    pause = runner._pause_others

    def spy(timed):  # the other workers' states, read from /proc, once they are paused
        resume = pause(timed)
        states.append([_state(pid) for pid in _children() if pid != timed])
        return resume

    runner._pause_others = spy
    # Device work the gate's log cannot see: the problem hosts' (references, inputs). Each request must come
    # from a thread holding the gate (H200 review, 2026-12-02: the burst's checked references and the
    # refresh set's case were made holding nothing).
    from solbench.engine.problem_host import ProblemHost

    unheld: list[str] = []
    request = ProblemHost.request

    def watched(host, problem, what, header, reply_bytes=0):
        if gate_on and not runner.gate.held_here():
            unheld.append(f"{header.get('op')}: {what}")
        return request(host, problem, what, header, reply_bytes)

    monkeypatch.setattr(ProblemHost, "request", watched)
    records = runner.run(_plan(tmp_path))
    assert unheld == [], unheld[:5]
    for r in records:  # the parent-clocked burst may miss on a busy CPU: not what this test is about
        if r.status == "REWARD_HACK" and r.correctness.get("failed_in") == "burst":
            r.status = "PASSED"
    assert sorted((r.problem, r.workload, r.solution, r.status) for r in records) == sorted(
        [("tiny.scaled_add", w, c, "PASSED") for w in ("n4", "n32") for c in ("honest", "honest_b")]
        + [("tiny.row_write", "s8", "row_write_inplace", "PASSED"),
           ("tiny.row_write", "s8", "row_write_copy", "INCORRECT")])  # it leaves its input as it was
    windows = [i for i in runner.gate.intervals if i.exclusive]
    assert "time" in {w.kind for w in windows} <= {"time", "burst"} and all(w.pid is not None for w in windows)
    timed = [w for w in windows if w.kind == "time"]
    assert len(timed) == 5  # one per record that passed its rounds, its first burst inside it
    # Only a second burst attempt holds a window of its own, after its timing's.
    again = {f"{r.problem}/{r.workload}/{r.solution}" for r in records
             if len((r.correctness.get("burst") or {}).get("attempts", [])) > 1}
    assert {w.owner for w in windows if w.kind == "burst"} == again
    assert all(b.start >= t.end for t in timed for b in windows if b.kind == "burst" and b.owner == t.owner)
    intervals = runner.gate.intervals
    assert _concurrent([i for i in intervals if not i.exclusive])  # the lanes really ran side by side
    found = overlaps(intervals)
    if gate_on:
        assert found == [], found[:3]
    else:
        assert found  # the control: without the discipline, other work lands inside timing windows
    if gate_on:  # during every window every other worker of the run was stopped
        assert len(states) == len(windows) and any(states)
        assert all(state in ("T", "Z") for window in states for state in window), states  # stopped (or exited)
    # Inputs and reference outputs once per (problem, workload), for both candidates (a hold that stepped
    # out while its host served another lane is logged in pieces).
    assert sorted({i.owner for i in intervals if i.kind == "cases"}) == [
        "tiny.row_write/s8", "tiny.scaled_add/n32", "tiny.scaled_add/n4"]
    if gate_on:
        _assert_window_parts(records, timed)
    if gate_on:  # every record's phases account for its wall
        for r in records:
            harness = r.harness
            assert set(harness) >= {"wall_s", "cases_s", "rounds_s", "verdict_s"}
            assert phase_total(harness) == pytest.approx(harness["wall_s"], rel=0.05), harness


@pytest.mark.slow
def test_run_item_is_public_and_hooks_see_every_record_before_it_is_written(tmp_path):
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    seen = []

    def hook(record, context):
        seen.append((record.workload, context.workload.name, context.candidate.name))
        assert context.cases is not None and len(context.cases.rounds) == options.rounds  # what a profiler calls
        record.tags.append("tagged_by_hook")  # what a hook changes is written (a declared key: the record is checked)

    out = tmp_path / "r.jsonl"
    runner = Runner(options, out, hooks=[hook], identity=RunIdentity(run_id="fixed-run", base_seed=11))
    problem = load_problem(TINY / "scaled_add")
    item = PlanItem(problem, problem.workloads[:2], describe_candidates([CANDIDATES / "honest.py"]))
    records = runner.run_item(item)
    assert [(r.workload, r.status) for r in records] == [("n4", "PASSED"), ("n32", "PASSED")]
    assert seen == [("n4", "n4", "honest"), ("n32", "n32", "honest")]
    assert runner.run_id == "fixed-run" and runner.base_seed == 11
    written = out.read_text().splitlines()
    assert len(written) == 2 and all('"tagged_by_hook"' in line and '"fixed-run"' in line for line in written)
    again = runner.run_item(item)  # the same runner, the same identity: the same inputs
    assert [r.run_id for r in again] == ["fixed-run"] * 2
    for phase in PHASES:
        assert all(isinstance(r.harness.get(phase, 0.0), float) for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("failures", [1, 2, 3])
def test_a_record_that_ran_out_of_memory_runs_again_with_twice_its_room_then_alone(tmp_path, failures):
    """Out of memory beside others: the record runs again holding twice, then four times its reservation (the
    pipeline keeps flowing), and only after a third time alone, holding the whole budget."""
    from solbench.engine.pipeline import record_bytes

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    make, tries = runner._make_cases, []

    def short_of_memory(problem, workload, ledger):
        tries.append(runner.memory.held)
        if len(tries) <= failures:  # a reference out of memory beside other records, then too little memory free
            if len(tries) == 2:
                raise DeviceMemoryShort([f"{problem.name}: needs at least 2.5 GiB but cuda has 1.8 GiB free"])
            raise ProblemError([f"{problem.name}: the reference raised OutOfMemoryError: CUDA out of memory"])
        return make(problem, workload, ledger)

    runner._make_cases = short_of_memory
    problem = load_problem(TINY / "scaled_add")
    (record,) = runner.run_item(PlanItem(problem, problem.workloads[:1], describe_candidates([CANDIDATES / "honest.py"])))
    assert record.status == "PASSED"
    need = record_bytes(problem, problem.workloads[0], options.rounds, "cpu")
    held = [need, 2 * need, 4 * need, max(need, runner.memory.budget)][: failures + 1]
    assert tries == held
    harness = record.harness
    assert harness["memory_retry_s"] > 0 and len(harness["memory_retries"]) == failures
    assert "out of memory" in harness["memory_retries"][0]
    assert failures < 2 or "GiB free" in harness["memory_retries"][1]  # H200 call 9: a free-memory check aborted the run
    assert phase_total(harness) == pytest.approx(harness["wall_s"], rel=0.05)


@pytest.mark.parametrize("error", ["host", "parent"])
def test_a_retry_keeps_the_worker_when_a_problem_host_ran_out_of_memory_and_starts_afresh_when_the_parent_did(
        tmp_path, error):
    """A problem host's reference out of memory leaves the candidate's worker as it was: the retry runs on the same
    process (its compiled shapes kept). Out of memory in the parent (perhaps mid-reply) starts a fresh worker."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    make, workers = runner._make_cases, []

    def short_of_memory(problem, workload, ledger):
        (slot,) = runner._active.values()
        slot.ensure_worker(60)
        workers.append(slot.client.proc.pid)
        if len(workers) == 1:
            if error == "host":
                raise ProblemError([f"{problem.name}: the reference raised OutOfMemoryError: CUDA out of memory"])
            raise RuntimeError("CUDA out of memory. Tried to allocate 28.00 MiB")
        return make(problem, workload, ledger)

    runner._make_cases = short_of_memory
    problem = load_problem(TINY / "scaled_add")
    (record,) = runner.run_item(PlanItem(problem, problem.workloads[:1], describe_candidates([CANDIDATES / "honest.py"])))
    assert record.status == "PASSED" and len(record.harness["memory_retries"]) == 1 and len(workers) == 2
    assert (workers[0] == workers[1]) is (error == "host")


@pytest.mark.slow
def test_a_retry_reserves_at_most_half_the_budget_beside_others(tmp_path):
    """A big record's retries beside others are capped at half the budget (more would wait for an empty device
    without holding the others back); alone it holds the whole budget."""
    from solbench.engine.pipeline import record_bytes

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    problem = load_problem(TINY / "scaled_add")
    need = record_bytes(problem, problem.workloads[0], options.rounds, "cpu")
    runner.memory.budget = 3 * need
    make, tries = runner._make_cases, []

    def short_of_memory(problem, workload, ledger):
        tries.append(runner.memory.held)
        if len(tries) <= 3:
            raise ProblemError([f"{problem.name}: the reference raised OutOfMemoryError: CUDA out of memory"])
        return make(problem, workload, ledger)

    runner._make_cases = short_of_memory
    (record,) = runner.run_item(PlanItem(problem, problem.workloads[:1], describe_candidates([CANDIDATES / "honest.py"])))
    assert record.status == "PASSED"
    assert tries == [need, 3 * need // 2, 3 * need // 2, 3 * need]


@pytest.mark.slow
def test_a_record_short_of_memory_even_alone_is_not_run_and_the_rest_of_the_run_goes_on(tmp_path):
    """Short of memory beside others, twice, then alone: the device is too small for it. The run goes on
    (H200, 2026-12-02: one such workload ended a library pass) and ends with one error naming it, after
    every other record is written."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    out = tmp_path / "r.jsonl"
    runner = Runner(options, out)
    make, tries = runner._make_cases, []

    def too_big(problem, workload, ledger):
        if workload.name == "n4":
            tries.append(runner.memory.held)
            raise DeviceMemoryShort([f"{problem.name}: workload n4: needs at least 9.0 GiB but cpu has 1.0 GiB free"])
        return make(problem, workload, ledger)

    runner._make_cases = too_big
    problem = load_problem(TINY / "scaled_add")
    item = PlanItem(problem, problem.workloads[:2], describe_candidates([CANDIDATES / "honest.py"]))
    with pytest.raises(DeviceMemoryShort, match=r"workload n4: needs at least 9.0 GiB .*\(honest\)"):
        runner.run([item])
    assert len(tries) == 4 and tries[-1] >= runner.memory.budget  # three times beside others, then alone
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["workload"], r["status"]) for r in written] == [("n32", "PASSED")], [r["reason"] for r in written]


@pytest.mark.slow
def test_a_dispatched_item_reports_its_record_not_run_as_its_error(tmp_path):
    """run_item (an executor's item) ends with the records it could not hold as its error, the others written."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    out = tmp_path / "r.jsonl"
    runner = Runner(options, out)
    make = runner._make_cases

    def too_big(problem, workload, ledger):
        if workload.name == "n4":
            raise DeviceMemoryShort([f"{problem.name}: workload n4: needs at least 9.0 GiB but cpu has 1.0 GiB free"])
        return make(problem, workload, ledger)

    runner._make_cases = too_big
    problem = load_problem(TINY / "scaled_add")
    item = PlanItem(problem, problem.workloads[:2], describe_candidates([CANDIDATES / "honest.py"]))
    with pytest.raises(DeviceMemoryShort, match="workload n4"):
        runner.run_item(item)
    assert [json.loads(line)["workload"] for line in out.read_text().splitlines()] == ["n32"]
    item.workloads = problem.workloads[1:2]
    assert [r.workload for r in runner.run_item(item)] == ["n32"]  # an earlier item's miss is not this one's


def test_before_a_record_runs_alone_idle_lanes_and_hosts_give_their_device_memory_back(tmp_path):
    """Idle lanes' workers (their caches, the pools they map) and idle hosts are stopped; the lane about
    to run alone keeps its worker, a lane not yet loaded is left as it is, a lent host is kept."""
    from solbench.engine.ledger import Ledger
    from solbench.engine.problem_host import HostPool

    class Slot:
        def __init__(self, state):
            self.state, self.retired, self.owner = state, 0, "p/w/c"

        def retire(self):
            self.retired += 1
            self.state = "none"

    class Host:
        starts = 1

        def __init__(self):
            self.closed = False

        def close(self):
            self.closed = True

        def expect(self, folders):
            return self

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    me, idle, starting = Slot("ready"), Slot("ready"), Slot("spawned")
    runner._active = {id(s): s for s in (me, idle, starting)}
    made = []
    runner.hosts = HostPool(lambda: made.append(Host()) or made[-1], size=2)
    with runner.hosts.lend(set()) as lent:
        with runner.hosts.lend(set()):
            pass  # given back: idle now
        runner._clear_device(me, Ledger())
        assert (me.retired, idle.retired, starting.retired) == (0, 1, 0)
        assert [h.closed for h in made] == [False, True] and made[0] is lent
    with runner.hosts.lend(set()) as again:
        assert again is lent  # the lent one was kept and is idle now


def test_a_record_reserves_room_for_its_bursts_outputs():
    """The reservation counts each copy where it lives (the parent's cases, the worker's device pool, the parent's
    copies of a timing reply, the worker's own copies, the problem host's case) and the burst's outputs, kept
    in the worker and, on their way back, in the pool: at the first burst's calls on a GPU (50 at 1 ms a call),
    within each budget."""
    from solbench.engine import burst
    from solbench.engine.pipeline import RECORD_FIXED_BYTES, record_bytes

    problem = load_problem(Path(__file__).parents[1] / "fixtures" / "tiny" / "scaled_add")
    workload = problem.workloads[0]
    axes = problem.resolve_axes(workload)
    o = 4 * axes["N"] * axes["D"]  # one float32 output [N, D]
    i = problem.auto_bytes(axes) - o
    sets, reply = 4, 4 + 2 + 2 + 1  # timing sets; a timing reply's outputs: each set's last, 4 kept, the refresh run's
    timing = sets * i + reply * o  # a timing request in the pool, and the parent's copies of its reply
    base = (3 + sets) * (i + o) + timing + sets * i + (sets + 1) * o + (i + o) + RECORD_FIXED_BYTES
    calls = burst.call_count(1e-9, o, "cuda")
    assert calls <= math.ceil(burst.TARGET_S["cuda"] / burst.GPU_MIN_CALL_S)
    room = calls * o
    assert record_bytes(problem, workload, 3, "cuda") == base + max(timing, room) + room
    cpu_room = min(burst.OUTPUT_BUDGET_BYTES["cpu"], burst.MAX_CALLS * o)
    assert record_bytes(problem, workload, 3, "cpu") == base + max(timing, cpu_room) + cpu_room
    big = 1 << 30
    assert burst.room_bytes(big, "cuda") == burst.OUTPUT_BUDGET_BYTES["cuda"]


def test_try_acquire_reserves_only_what_fits_beside_the_held_and_never_waits():
    from solbench.engine.pipeline import MemoryGate

    memory = MemoryGate(100)
    assert memory.try_acquire(60) == 60
    assert memory.try_acquire(50) is None and memory.held == 60  # 110 would overflow: nothing reserved
    assert memory.try_acquire(40) == 40 and memory.held == 100
    memory.release(40)
    waiter = threading.Thread(target=lambda: memory.release(memory.acquire(10, alone=True)))
    waiter.start()  # waits to run alone while 60 are held
    deadline = time.monotonic() + 5
    while not memory._alone_waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert memory.try_acquire(1) is None  # a record waiting to run alone goes first
    memory.release(60)
    waiter.join(5)
    assert not waiter.is_alive() and memory.held == 0


def test_beside_others_a_record_waits_for_the_device_to_have_its_bytes_free():
    """Within the budget, a record beside others is let in only once the device has its bytes free (what
    other processes hold counts: the reservations are estimates); alone it is let in whatever is free."""
    from solbench.engine.pipeline import MemoryGate

    free = {"bytes": 30}
    memory = MemoryGate(100, free_bytes=lambda: free["bytes"])
    assert memory.acquire(50) == 50  # nothing held: let in, whatever is free
    assert memory.try_acquire(40) is None  # fits the budget, but only 30 bytes are free
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(memory.acquire(40)))
    waiter.start()
    time.sleep(0.6)  # more than two reads of the free bytes
    assert got == [] and memory.held == 50
    free["bytes"] = 45  # another process let go of its memory: nobody is notified
    waiter.join(5)
    assert not waiter.is_alive() and got == [40] and memory.held == 90
    memory.release(40)
    free["bytes"] = 30  # a record whose cases another lane made needs only the rest free
    assert memory.acquire(40, free_need=25) == 40 and memory.held == 90


def test_cases_cache_holds_a_value_being_made_and_kept_for_a_later_lane():
    problem = load_problem(Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "scaled_add" / "problem.yaml")
    n4 = next(w for w in problem.workloads if w.name == "n4")
    cache = CasesCache()
    cache.expect([Lane(problem, [n4], c) for c in ("a", "b")])  # two lanes take it
    assert not cache.holds(problem, n4)
    seen: list[bool] = []
    assert cache.take(problem, n4, lambda: seen.append(cache.holds(problem, n4)) or "cases") == "cases"
    assert seen == [True] and cache.holds(problem, n4)  # being made, then kept for the second lane
    assert cache.take(problem, n4, lambda: "made again") == "cases" and not cache.holds(problem, n4)


def test_the_parents_allocator_is_made_to_give_free_pieces_back(monkeypatch):
    """On a GPU the parent's allocator maps segments in pieces (its cache emptied, every free piece goes back);
    a torch without the setting is left as it is."""
    import torch

    from solbench.engine.pipeline import compact_allocator

    seen = []
    monkeypatch.setattr(torch.cuda.memory, "_set_allocator_settings", seen.append)
    monkeypatch.setattr(torch._C, "_accelerator_setAllocatorSettings", seen.append, raising=False)
    compact_allocator()
    assert seen == ["expandable_segments:True"]

    def refuse(setting):
        raise RuntimeError("unknown allocator setting")

    monkeypatch.setattr(torch.cuda.memory, "_set_allocator_settings", refuse)
    monkeypatch.setattr(torch._C, "_accelerator_setAllocatorSettings", refuse, raising=False)
    compact_allocator()  # no error


def test_lanes_hand_the_interpreter_over_quickly_while_they_run_and_restore_it_after():
    """A lane back from its worker inside a timing window waits for the GIL at most the lanes' switch
    interval (the interpreter's default is 5 ms); the interval is restored after the run."""
    import sys

    from solbench.engine.pipeline import run_lanes
    from solbench.settings import LANE_SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    seen: list[float] = []
    run_lanes([1, 2, 3], lambda lane: seen.append(sys.getswitchinterval()), 2, threading.Event())
    assert seen == [LANE_SWITCH_INTERVAL_S] * 3
    assert sys.getswitchinterval() == before


def test_a_record_reserves_the_timing_sets_its_cases_hold_not_the_most_there_can_be():
    """Sets are counted as a flushed timing makes them: inputs past 2x L2 need 2 (H200 call 25: counted at 4, a
    record of GiBs reserved ~40% more than it held); the most (4) where L2 is unknown. On the CPU the count is
    the one prepare_cases makes there."""
    from solbench.engine.cases import prepare_cases
    from solbench.engine.pipeline import cases_bytes, record_bytes, set_count
    from solbench.engine.problem_code import load_reference

    problem = load_problem(TINY / "scaled_add")
    small, big = problem.workload("n4"), problem.workload("n131072")  # inputs of 2 KiB and 64 MiB
    l2 = 60 << 20  # an H200's
    assert set_count(problem, problem.resolve_axes(small), "cuda", l2) == 4
    assert set_count(problem, problem.resolve_axes(big), "cuda", l2) == 2
    assert set_count(problem, problem.resolve_axes(big), "cuda", None) == 4
    assert record_bytes(problem, big, 3, "cuda", l2) < record_bytes(problem, big, 3, "cuda")
    assert record_bytes(problem, small, 3, "cuda", l2) == record_bytes(problem, small, 3, "cuda")
    assert cases_bytes(problem, big, 3, "cuda", l2) == 5 * problem.auto_bytes(problem.resolve_axes(big))
    made = prepare_cases(problem, big, base_seed=1, device="cpu", rounds=3, ref_fn=load_reference(problem),
                         gen_fn=None, l2_bytes=l2, flushed=True)
    assert len(made.sets) == set_count(problem, made.axes, "cpu", l2)


def test_the_memory_gate_charges_each_wait_to_its_cause():
    """A wait past the budget, one for the device's free memory, and one behind a record waiting to run alone
    are each charged to their own cause, about as long as they lasted."""
    from solbench.engine.pipeline import MemoryGate

    free = {"bytes": 1000}
    memory = MemoryGate(100, free_bytes=lambda: free["bytes"])
    held = memory.acquire(80)

    def wait_then_release(nbytes: int, **kw: object) -> threading.Thread:
        t = threading.Thread(target=lambda: memory.release(memory.acquire(nbytes, **kw)))
        t.start()
        return t

    waiter = wait_then_release(30)  # 110 > 100: the budget
    time.sleep(0.5)
    memory.release(held)
    waiter.join(5)
    held = memory.acquire(50)
    free["bytes"] = 10  # within the budget, but the device has too little free
    waiter = wait_then_release(20)
    time.sleep(0.5)
    free["bytes"] = 1000
    waiter.join(5)
    alone = wait_then_release(10, alone=True)
    while not memory._alone_waiting:
        time.sleep(0.01)
    behind = wait_then_release(1)
    time.sleep(0.5)
    memory.release(held)
    alone.join(5)
    behind.join(5)
    waits = memory.waits_s
    assert 0.4 <= waits["budget"] < 2 and 0.4 <= waits["device_free"] < 2
    assert 0.4 <= waits["alone"] < 2 and 0.4 <= waits["behind_alone"] < 2
    assert memory.held == 0


def test_a_record_that_waited_long_for_memory_keeps_its_room_and_goes_in_before_later_smaller_ones(monkeypatch):
    """A large record waits; once it has waited MEMORY_WAIT_AGE_S, a smaller one that would take its room waits behind
    it (``behind_aged``), one that fits beside it still goes in at once, and so does a warm-up's try; before that
    age, the smaller one goes in first (as before)."""
    from solbench.engine import pipeline

    monkeypatch.setattr(pipeline, "MEMORY_WAIT_AGE_S", 0.2)
    memory = pipeline.MemoryGate(100)
    assert memory.age_s == 0.2
    held = memory.acquire(60)
    order: list[str] = []

    def enter(name: str, nbytes: int) -> threading.Thread:
        def body() -> None:
            got = memory.acquire(nbytes)
            order.append(name)
            time.sleep(0.3)
            memory.release(got)
        t = threading.Thread(target=body)
        t.start()
        return t

    large = enter("large", 70)  # 130 > 100: waits
    time.sleep(0.05)
    early = enter("early", 30)  # not aged yet: goes in beside the 60
    early.join(5)
    time.sleep(0.25)  # the large one has now waited past the age
    small = enter("small", 30)  # 60 + 30 + 70 > 100: behind the large one
    time.sleep(0.05)
    assert memory.try_acquire(25) is None  # a warm-up's try leaves the room too
    beside = enter("beside", 5)  # 60 + 5 + 70 > 100 too: waits as well
    time.sleep(0.2)
    assert order == ["early"]
    memory.release(held)
    for t in (large, small, beside):
        t.join(5)
    assert order[0] == "early" and sorted(order[1:]) == ["beside", "large", "small"]  # all in once there is room
    assert memory.waits_s["behind_aged"] > 0.1 and memory.held == 0
    memory2 = pipeline.MemoryGate(100)
    keep = memory2.acquire(20)
    waiter = threading.Thread(target=lambda: memory2.release(memory2.acquire(90)))
    waiter.start()
    time.sleep(0.3)
    fits = memory2.try_acquire(5)  # 20 + 5 + 90 > 100: kept for the aged one
    assert fits is None
    memory2.release(keep)
    waiter.join(5)
    assert memory2.held == 0


# --- the library pass's own summary (benchmarks/library_throughput.py) ------------------------------

def _library_pass_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("library_throughput", HERE.parent / "benchmarks" /
                                                  "library_throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_library_pass_counts_memory_seconds_inside_the_reservations_only():
    """GiB reserved x seconds, by phase, over the records: the phases before a record's reservation (its wait for
    memory, its lane's worker start, load and warm-up) hold none of it."""
    bench = _library_pass_module()
    rows = [{"reserved_gib": 2.0, "phases": {"rounds_s": 1.5, "memory_wait_s": 9.0, "warm_s": 4.0, "cases_s": 0.5}},
            {"reserved_gib": 10.0, "phases": {"rounds_s": 0.1, "worker_wait_s": 3.0, "load_s": 1.0,
                                              "device_wait_s": 2.0}},
            {"reserved_gib": None, "phases": {"rounds_s": 50.0}}]  # a record the plan gives no size: left out
    assert bench.memory_seconds(rows) == {"device_wait_s": 20.0, "rounds_s": 4.0, "cases_s": 1.0}
    assert bench.memory_seconds([]) is None


def test_the_library_pass_totals_the_worker_s_split_of_each_timing_request():
    """``request``: the worker's parts of its timing request (``timing.details``) per record, totalled and their
    medians; a record without a timing (or one whose worker reported none) is left out, unknown keys too."""
    from types import SimpleNamespace

    bench = _library_pass_module()
    timed = [SimpleNamespace(timing={"details": {"worker_timer_s": t, "worker_findings_s": f, "flush_bytes": 1 << 20}})
             for t, f in ((0.05, 0.01), (0.07, 0.002), (0.2, 0.004))]
    rows = [{"request": bench.request_parts(r)} for r in timed]
    rows += [{"request": bench.request_parts(SimpleNamespace(timing=None))},
             {"request": bench.request_parts(SimpleNamespace(timing={"details": {"flush_bytes": 8}}))}]
    assert rows[0]["request"] == {"worker_timer_s": 0.05, "worker_findings_s": 0.01} and rows[-1]["request"] is None
    got = bench.window_parts(rows, "request")
    assert got["records"] == 3
    assert got["total_s"] == {"worker_findings_s": 0.016, "worker_timer_s": 0.32}
    assert got["median_s"] == {"worker_findings_s": 0.004, "worker_timer_s": 0.07}


def test_the_library_pass_rewrites_its_summary_at_most_every_few_seconds(tmp_path, monkeypatch):
    """A record after a recent write leaves the file as it was; one after ``SUMMARY_EVERY_S`` rewrites it, and the
    run's end writes it whatever the time."""
    from types import SimpleNamespace

    bench = _library_pass_module()
    now = [100.0]
    monkeypatch.setattr(bench.time, "perf_counter", lambda: now[0])
    out = tmp_path / "summary.json"
    tally = bench.Tally(out, {"device": "cpu"})

    def record(n):
        return SimpleNamespace(problem="p", workload=f"w{n}", solution="c", status="PASSED", bytes=1, harness={"wall_s": 1.0},
                               timing={"samples_s": [0.1]}, device_index=None, host=None)

    tally.record(record(1))
    assert json.loads(out.read_text())["records"] == 1
    now[0] += bench.SUMMARY_EVERY_S / 2
    tally.record(record(2))
    assert json.loads(out.read_text())["records"] == 1  # too soon: the summary of one record stays
    now[0] += bench.SUMMARY_EVERY_S
    tally.record(record(3))
    assert json.loads(out.read_text())["records"] == 3
    tally.record(record(4))
    assert tally.write(complete=True)["records"] == 4 and json.loads(out.read_text())["records"] == 4


def test_the_memory_bound_is_the_reservations_gib_seconds_over_the_budget():
    """benchmarks/memory_bound.py: each record's reservation times the seconds it held it (its phases before the
    reservation left out), over the budget; the library's records held as long as the read ones of their size."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("memory_bound", HERE.parent / "benchmarks" / "memory_bound.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    records = [{"problem": "a", "workload": "w", "harness": {"rounds_s": 2.0, "memory_wait_s": 50.0, "warm_s": 9.0}},
               {"problem": "b", "workload": "w", "harness": {"rounds_s": 1.0, "device_wait_s": 3.0}},
               {"problem": "gone", "workload": "w", "harness": {"rounds_s": 7.0}}]  # not in the plan: left out
    sizes = {("a", "w"): 1.0, ("b", "w"): 10.0, ("c", "w"): 12.0}
    got = bench.bound(records, sizes, budget_gib=2.0, library_pass=_library_pass_module())
    assert got["records"] == 2 and got["gib_s"] == 42 and got["wall_bound_s"] == 21.0  # 1 x 2 + 10 x (1 + 3)
    assert got["by_phase"] == {"device_wait_s": 30, "rounds_s": 12}
    # a: 1 GiB, held like the read 1 GiB record (2 s); b and c: like the 10 GiB one (4 s); two candidates each
    assert got["library"] == {"records": 6, "gib_s": 2 * (1 * 2 + 10 * 4 + 12 * 4), "wall_bound_s": 90.0}
