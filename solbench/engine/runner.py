"""The run loop (trusted parent): problems x workloads x candidates -> result records.

Candidates run one at a time, each in its own worker (:mod:`solbench.engine.evaluation`), over all the
workloads of a problem: while one is measured, no other candidate's code is alive. For each
workload the parent makes the inputs (fresh seeds per round and per timing set, derived from a
base seed that is random per run unless given, so every candidate sees the same inputs) and the
reference outputs. A candidate's worker is reused for its next workload while healthy; after any
failure the next workload gets a fresh one. Workers are started ahead (``workers_ahead``): the
problem's next candidates', then the next problem's first ones. Each record is appended to the
results file as soon as it is made, so a kill loses only the workload in flight. On a CUDA run the
workers' tensors travel through a GPU pool shared with each worker alone (``RunOptions.transport``,
:mod:`solbench.worker.devwire`), else through host shared memory.

Verdict checks after the evaluation: the physics floor (:func:`solbench.engine.scoring.physics_floor`),
then the guards' review (:func:`solbench.guards.review`). The parent makes itself undumpable
(:func:`solbench.guards.make_undumpable`) so a worker cannot read its memory or write its ``/proc``
files. Run as root, the workers run as ``RunOptions.worker_user``. A run first removes what runs
killed earlier left behind, and SIGTERM or SIGHUP (like SIGINT) stop it with its workers killed and
their folders removed (:mod:`solbench.worker.cleanup`). With
``RunOptions.guards`` off (the "engine only" comparison) neither happens, the workers run without
their guards, and every record is flagged ``guards-off``. Before its first worker a run writes the
bytecode caches its workers cannot write themselves (:mod:`solbench.engine.bytecode`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from solbench.data import (
    HardwareSpec,
    Problem,
    ResultRecord,
    RooflinePoint,
    Status,
    Workload,
    append_record_checked,
    make_inputs,
)
from solbench.engine.ahead import PREPARE_AHEAD, Preparations
from solbench.engine.bytecode import prime_bytecode
from solbench.engine.cases import WorkloadCases, derive_seed, prepare_cases
from solbench.engine.environment import collect_environment, cpu_count, device_name
from solbench.engine.evaluation import CandidateSlot, EvaluationContext, evaluate, without_harness_root
from solbench.engine.identity import RunIdentity
from solbench.engine.ledger import PHASES, Ledger
from solbench.engine.options import GUARDS_OFF_FLAG, RunOptions, resolve_transport, timing_config
from solbench.engine.pipeline import (
    CACHE_SHARE,
    RECORD_FIXED_BYTES,
    CasesCache,
    Lane,
    LaneSlots,
    MemoryGate,
    MemoryWaitStopped,
    cases_bytes,
    compact_allocator,
    default_hosts,
    default_in_flight,
    device_gate,
    free_bytes_of,
    memory_budget,
    record_bytes,
    run_lanes,
)
from solbench.engine.problem_host import HostPool, ProblemHost, new_host
from solbench.engine.scoring import Evaluation, build_record, physics_floor, resolve_spec
from solbench.engine.warm import compiles_per_shape, warm_shapes
from solbench.engine.work import timed_point
from solbench.errors import DeviceMemoryShort, ProblemError, says_out_of_memory
from solbench.guards import make_undumpable, resolve_account, review
from solbench.settings import WARM_COPIES, WINDOW_STOP_WAIT_S
from solbench.worker import (
    CandidateFile,
    cache_key,
    memory_retried,
    source_digest,
    stop_on_signals,
    sweep_dead_workers,
)


@dataclass
class PlanItem:
    """One problem, the workloads to run, and the candidates to run on them."""

    problem: Problem
    workloads: list[Workload]
    candidates: list[CandidateFile]


class Progress(Protocol):
    def begin(self, total: int) -> None: ...

    def task(self, problem: str, workload: str, candidate: str) -> None: ...

    def record(self, record: ResultRecord) -> None: ...


class NullProgress:
    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        pass

    def record(self, record: ResultRecord) -> None:
        pass


@dataclass
class ReviewContext:
    """What a guard reviewing an evaluation may look at (all trusted, parent-side); a record hook gets it
    too, with the workload's ``cases`` (its inputs and reference outputs: what a profiling hook calls
    the candidate on)."""

    problem: Problem
    workload: Workload
    axes: dict[str, int]
    roof: RooflinePoint
    spec: HardwareSpec
    candidate: CandidateFile
    device: str
    cases: WorkloadCases | None = None


RecordHook = Callable[[ResultRecord, "ReviewContext"], None]


@dataclass
class Runner:
    """Runs plans under one set of options: one spec, run identity (id and base seed) for all its records.

    ``hooks`` are called with each record (and what it was made from) before it is written; they
    may add to it (the interleave tag, a profile). The schedule is :mod:`solbench.engine.pipeline`'s:
    ``RunOptions.in_flight`` lanes at once, one device gate (:attr:`gate`) for all their requests.
    """

    options: RunOptions
    output: Path | None  # None: write nothing, records go to progress.record (solbench.dispatch)
    progress: Progress = field(default_factory=NullProgress)
    identity: RunIdentity | None = None  # None: a new one (the options' seed, else a secret random one)
    hooks: list[RecordHook] = field(default_factory=list)
    # Whether the next lanes' workers are made ready ahead on a GPU (solbench.engine.ahead); the profiler's pairs
    # start their workers under Nsight Compute their own way.
    prepares_ahead: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.spec, self.roof_kind = resolve_spec(self.options.device, self.options.gpu)
        self.identity = self.identity or RunIdentity.new(self.options.seed)
        if self.options.guards:
            # Best effort: a worker (same user) can no longer ptrace the parent or read its memory
            # (the secret base seed, the reference outputs).
            make_undumpable()
        if self.options.device.startswith("cuda"):
            compact_allocator()  # before the parent's first allocation
            self._use_device()
        self.environment = collect_environment(self.options.device)
        self.environment["seed"] = self.options.seed  # null: a random seed, kept secret
        self.device_name = device_name(self.options.device, self.environment)
        self.records: list[ResultRecord] = []
        self.timing = timing_config(self.options, self.spec.l2_bytes)
        self.account = resolve_account(self.options.worker_user)  # None: workers keep this user
        # device: each worker gets a GPU pool shared with it alone (solbench.worker.devwire); else memfd.
        self.transport, self.transport_note = resolve_transport(self.options)
        self.in_flight = self.options.in_flight or default_in_flight(self.options.device, cpu_count())
        self.gate = device_gate(self.options.device, self.in_flight)
        budget = memory_budget(self.options.device)
        self.slots = LaneSlots(self.in_flight)  # a lane waiting for memory lends its slot to a spare thread
        self.memory = MemoryGate(int(budget * (1 - CACHE_SHARE)), free_bytes_of(self.options.device),
                                 self.slots.idle)
        self.cases = CasesCache(int(budget * CACHE_SHARE), size=_cases_bytes)
        self._prestarted: dict[tuple[str, str], CandidateSlot] = {}  # workers started ahead, by lane
        self._begun: set[tuple[str, str]] = set()  # lanes started (no worker is started ahead for them)
        self._active: dict[int, CandidateSlot] = {}  # by id: the slots of the lanes running
        # The next lanes' workers loaded and warmed ahead, off the lanes' threads (solbench.engine.ahead): on a GPU,
        # where lanes make their workers ready before their first record; none by default.
        self._preparations = Preparations(0)
        self.prepare_ahead(PREPARE_AHEAD if self.in_flight > 1 else 0)
        # The problems' own code (generators, references, cost hooks) runs in sandboxed hosts
        # (solbench.engine.problem_host), a pool of them lent to the lanes making cases, each started on
        # first use and kept for the run (stopped when it ends, or at exit).
        opts = self.options
        self.hosts = HostPool(self._new_host, default_hosts(self.in_flight, cpu_count(), opts.device))
        self._folders: set[str] = set()
        self._lock = threading.RLock()  # records, the results file, progress, hooks, the slots above
        self._aborted = False
        self._stop = threading.Event()  # the current run's: set, no new record starts
        self.not_run: list[str] = []  # records the device could not hold even alone, one line each
        sweep_dead_workers()
        # Before any worker starts: the sandboxed processes cannot write the caches they would use.
        self.bytecode = prime_bytecode()

    @property
    def run_id(self) -> str:
        assert self.identity is not None
        return self.identity.run_id

    @property
    def base_seed(self) -> int:
        assert self.identity is not None
        return self.identity.base_seed

    def _use_device(self) -> None:
        import torch

        dev = torch.device(self.options.device)
        if dev.index is not None:  # plain "cuda" means the current device
            torch.cuda.set_device(dev)

    def run(self, plan: list[PlanItem]) -> list[ResultRecord]:
        """Run a whole plan (every item's lanes, pipelined); the records, in the order they were made."""
        self.progress.begin(sum(len(p.workloads) * len(p.candidates) for p in plan))
        before = len(self.not_run)
        with stop_on_signals():
            try:
                self._run_lanes(lanes_of(plan))
            finally:
                self.discard_started()
                self._preparations.close()
                self.close_hosts()
        self._raise_not_run(before)
        return self.records

    def run_item(self, item: PlanItem, upcoming: PlanItem | None = None) -> list[ResultRecord]:
        """Run one item (a problem, its workloads, its candidates); ``upcoming``, the item expected
        next, gets workers started ahead meanwhile. Its records, also handed to progress and hooks."""
        before, missed = len(self.records), len(self.not_run)
        self.discard_started(keep={(item.problem.name, str(c.path)) for c in item.candidates})
        self._run_lanes(lanes_of([item]), lanes_of([upcoming]) if upcoming is not None else [])
        self._raise_not_run(missed)
        return self.records[before:]

    def _raise_not_run(self, since: int) -> None:
        """The records this run or item could not hold even alone, as its error once every other record
        is written (a dispatched item reports it as the item's error)."""
        if len(self.not_run) > since:
            raise DeviceMemoryShort(self.not_run[since:])

    def stop(self) -> None:
        """Start no new record (from any thread): those in flight finish and are written (one still waiting for
        its memory gives up: it never began), the run returns."""
        self._stop.set()

    def _run_lanes(self, lanes: list[Lane], upcoming: list[Lane] = ()) -> None:
        self.cases.expect(lanes)
        with self._lock:  # one host process per lane serves every problem of the run: no restart per folder
            self._folders.update(str(lane.problem.folder.resolve()) for lane in [*lanes, *upcoming])
        self.gate.pause = self._pause_others
        self._aborted = False
        stop = self._stop = self.memory.stop = threading.Event()
        queue = [*lanes, *upcoming]
        try:
            run_lanes(lanes, lambda lane: self._run_lane(lane, stop), self.in_flight, stop,
                      started=lambda i: self._start_ahead(queue, i), slots=self.slots)
        except BaseException:
            self._aborted = True  # records of workers killed now are not the candidates' doing
            self._retire_active()
            raise
        finally:
            self._begun.clear()

    def _run_lane(self, lane: Lane, stop: threading.Event) -> None:
        """One candidate over its workloads on one worker (a fresh one after any failure)."""
        if self.options.device.startswith("cuda"):
            self._use_device()  # this thread's current device: the run's
        with self._lock:  # taken and made active at once: a timing window never misses its worker (_pause_others)
            slot = self._slot(lane.candidate, lane.problem)
            slot.gate = self.gate
            self._active[id(slot)] = slot
        done = 0
        try:
            self._spawn_early(slot)
            ledger = self._first_ledger(slot, lane)
            for workload in lane.workloads:
                if stop.is_set():
                    break
                self._run_workload(slot, lane.problem, workload, ledger)
                ledger = None
                done += 1
        finally:
            self.cases.skip(lane.problem, lane.workloads[done:])
            self._retire_lane(slot)
            with self._lock:
                self._active.pop(id(slot), None)

    def _retire_lane(self, slot: CandidateSlot) -> None:
        """Stop a lane's worker at the lane's end (:class:`~solbench.engine.profiling.ProfilingRunner`
        does it in the background)."""
        slot.retire()

    def _spawn_early(self, slot: CandidateSlot) -> None:
        """Start the lane's worker now (unless started ahead), so that its imports overlap the first
        workload's inputs and references. On the CPU started holding the gate shared: no timing window
        is open meanwhile, and once the slot is active a window stops its process (:meth:`_pause_others`);
        on a GPU its imports load no device."""
        if slot.state != "none":
            return
        cpu = not self.options.device.startswith("cuda")
        with self.gate.shared(f"{slot.problem}/{slot.candidate.name}", "start") if cpu else nullcontext():
            slot.spawn()

    def _warms(self, lane: Lane) -> bool:
        """Whether the lane's worker is first called on its workloads' inputs (:mod:`solbench.engine.warm`): on a GPU
        (where a timed worker can no longer be locked), for a candidate that may compile per shape."""
        return (self.options.warm_shapes and self.options.device.startswith("cuda") and bool(lane.workloads)
                and compiles_per_shape(lane.candidate.path))

    def prepare_ahead(self, lanes: int) -> None:
        """Make up to ``lanes`` of the next lanes' workers ready ahead at once, on a GPU (0: none; the default is
        ``PREPARE_AHEAD``); before a run."""
        self._preparations.close()
        self._preparations = Preparations(lanes if self.prepares_ahead and self.options.device.startswith("cuda") else 0)

    def _first_ledger(self, slot: CandidateSlot, lane: Lane) -> Ledger | None:
        """The lane's first record's ledger: on a GPU its worker is made ready before that record reserves its memory,
        ahead on another thread (:meth:`_prepare_ahead`: the wait for it is this ledger's ``worker_wait_s``) or here
        (:meth:`_prepare`, also where the preparation ahead did not end with the worker ready)."""
        ledger = None
        prep = self._preparations.take(_key(lane))
        if prep is not None and prep.future.cancel():  # not begun: made ready here, not after those ahead of it
            prep = None
        if prep is not None:
            ledger = Ledger()
            began = time.monotonic()
            ready = prep.result()
            ledger.wait("worker_wait_s", time.monotonic() - began)
            if ready and slot.state == "ready":
                return ledger
        warms = self._warms(lane)
        return self._prepare(slot, lane, warms, ledger) if self._prepares(warms) else ledger

    def _prepare_ahead(self, slot: CandidateSlot, lane: Lane, cancel: threading.Event) -> bool:
        """A lane's worker made ready on a thread of :attr:`_preparations` before the lane begins (:meth:`_prepare`),
        its device pool and cached memory then given back (it may wait a while); True when it is ready. The phases
        it took belong to no record's wall: the first record's harness has their sum as ``prepared_ahead_s``."""
        if cancel.is_set() or slot.state == "none":
            return False
        began = time.monotonic()
        self._use_device()  # this thread's current device: the run's
        slot.gate = self.gate
        self._prepare(slot, lane, self._warms(lane), stop=cancel)
        if cancel.is_set() or slot.state != "ready":
            return False
        slot.release_pool()
        slot.startup = {k: v for k, v in slot.startup.items() if k not in PHASES}
        slot.startup["prepared_ahead_s"] = time.monotonic() - began
        return slot.state == "ready"

    def _prepares(self, warms: bool) -> bool:
        """Whether a lane's worker is made ready before its first record (:meth:`_prepare`): on a GPU, where records
        wait for the device's memory. On the CPU its start overlaps the first record's cases instead."""
        return warms or self.options.device.startswith("cuda")

    def _prepare(self, slot: CandidateSlot, lane: Lane, warms: bool, ledger: Ledger | None = None,
                 stop: threading.Event | None = None) -> Ledger:
        """On a GPU, before the lane's first record reserves its memory: its worker up and its candidate loaded, and
        for a candidate that may compile per shape each workload's shape compiled (:meth:`_warms`, the time in
        ``warm_s``). Returns the first record's ledger (the waits are in its wall); a load that fails is left to
        the first record to report. Inside the record the start and first compile held its whole reservation (H200
        call 30, in a pass bound by the device's memory: records waited for their workers 221 s and compiled
        their first shapes 258 s, a fifth of the records' memory-seconds; ``bert_base.attn_softmax_mask`` b128_s512
        held 31 GiB for a 15 s compile)."""
        ledger = slot.ledger = ledger or Ledger()
        slot.owner = f"{lane.problem.name}/{lane.workloads[0].name}/{slot.candidate.name}"
        # The worker's own memory reserved throughout: a record that must run alone waits for it (instead of
        # stopping this worker, which holds no record's reservation, as an idle one).
        try:
            held = self.memory.acquire(RECORD_FIXED_BYTES, ledger)
        except MemoryWaitStopped:  # the run stops: no record of this lane starts
            return ledger
        try:
            if slot.ensure_worker(self.options.compile_timeout_s) is not None or not warms:
                return ledger
            with ledger.phase("warm_s"):
                warm_shapes(slot, lane.problem, lane.workloads,
                            lambda w: self._warm_inputs(lane.problem, w, ledger), self.options.compile_timeout_s,
                            stop or self._stop)
        finally:
            self.memory.release(held)
        return ledger

    @contextmanager
    def _warm_inputs(self, problem: Problem, workload: Workload, ledger: Ledger) -> Iterator[dict[str, Any] | None]:
        """One input set of ``workload``, made by a problem host and held while a warm-up call runs; None (nothing
        made) when it does not fit beside the records in flight now, or could not be made (its record says why).
        Not waited for: the lane holds its worker's own reservation meanwhile, which a record waiting to run alone
        waits for (H200 call 34, 2026-12-03: a warm-up that waited stalled the pass; call 33, where they waited,
        went no faster than call 31)."""
        axes = problem.resolve_axes(workload)
        held = self.memory.try_acquire(WARM_COPIES * problem.auto_bytes(axes))
        if held is None:
            yield None
            return
        inputs: dict[str, Any] | None = None
        try:
            try:
                inputs = self._make_inputs(problem, workload, axes, ledger)
            except (ProblemError, RuntimeError, MemoryError):
                inputs = None
            yield inputs
        finally:
            if inputs is not None:
                inputs.clear()  # the tensors go before the reservation does
            self.memory.release(held)
            self._free_device_memory(f"{problem.name}/{workload.name}", ledger)

    def _make_inputs(self, problem: Problem, workload: Workload, axes: dict[str, int], ledger: Ledger) -> dict[str, Any]:
        """A seeded input set of the workload (not one a record uses), made by a problem host on the run's device."""
        with self._hosted(problem, workload, ledger) as (_, _, gen_fn):
            return make_inputs(problem, axes, derive_seed(self.base_seed, problem.name, workload.name, "warm", 0),
                               device=self.options.device, generator_fn=gen_fn, scalars=problem.scalars_for(workload))

    def _run_workload(self, slot: CandidateSlot, problem: Problem, workload: Workload,
                      ledger: Ledger | None = None) -> None:
        """One record. One that ran out of device memory beside others runs again with twice, then four
        times its reservation, then alone (the memory held by the records in flight is an estimate; running out
        is not the candidate's doing). Alone drains the pipeline: it comes last (H200, 2026-12-02:
        alone retries first held every lane back 20-150 s)."""
        slot.owner = f"{problem.name}/{workload.name}/{slot.candidate.name}"
        with self._lock:
            self.progress.task(problem.name, workload.name, slot.candidate.name)
        ledger = ledger or Ledger()
        reasons: list[str] = []
        record = None
        try:
            for scale, alone in RETRIES:
                if reasons:  # a retry: the attempts so far count as its wait
                    spent = ledger.wall()
                    ledger = Ledger(start=ledger.start)
                    ledger.wait("memory_retry_s", spent)
                record = self._attempt(slot, problem, workload, ledger, scale, alone, reasons)
                if record is not None:
                    break
        except DeviceMemoryShort as err:  # short even alone: the device is too small for this workload
            self._not_run(err, slot)
            return
        except MemoryWaitStopped:  # stopped before it began: no record (the run's time box, a failure)
            return
        assert record is not None
        if reasons:
            record.harness["memory_retries"] = [without_harness_root(r)[:800] for r in reasons]
        self._emit(record, ledger)

    def _not_run(self, err: DeviceMemoryShort, slot: CandidateSlot) -> None:
        """A record the device cannot hold, even alone: the run goes on without it and ends with it as
        its error, once every other record is written."""
        with self._lock:
            self.not_run.append(without_harness_root(f"{err} ({slot.candidate.name})"))

    def _attempt(self, slot: CandidateSlot, problem: Problem, workload: Workload, ledger: Ledger,
                 scale: int, alone: bool, reasons: list[str]) -> ResultRecord | None:
        """The record, or None when it ran out of device memory beside other records (its reason added
        to ``reasons``: the caller retries)."""
        slot.ledger = ledger
        l2, rounds, device_type = self.spec.l2_bytes, self.options.rounds, self.timing.device
        need = record_bytes(problem, workload, rounds, device_type, l2)
        # A retry's multiple stays within half the budget: past it the reservation waits for an empty device, as
        # alone does, but without holding the others back, and could wait for as long as records flow.
        need = max(need, min(need * scale, self.memory.budget // 2))
        made = cases_bytes(problem, workload, rounds, device_type, l2) if self.cases.holds(problem, workload) else 0
        held = self.memory.acquire(need, ledger, alone=alone, free_need=max(need - made, 0))
        if alone:
            began = ledger.clock()  # less the gate waits inside, which the gate charges itself
            self._clear_device(slot, ledger)
            ledger.wait("memory_wait_s", ledger.clock() - began)  # part of waiting for the memory
        try:
            with memory_retried(not alone):  # a device pool short of memory: the record retried, not moved to memfd
                with ledger.phase("cases_s"):
                    # The same seeds for every candidate: all of them see the same inputs, made once.
                    cases, roof = self.cases.take(problem, workload,
                                                  lambda: self._make_cases(problem, workload, ledger))
                record = self._run_one(slot, cases, roof)
        except (ProblemError, RuntimeError, MemoryError) as err:
            if not (isinstance(err, DeviceMemoryShort) or says_out_of_memory(str(err))):
                raise
            if alone:
                raise err if isinstance(err, DeviceMemoryShort) else DeviceMemoryShort(
                    [f"{problem.name}: workload {workload.name}: {' '.join(str(err).split())[:300]}"]) from None
            if not isinstance(err, ProblemError):
                # Out of memory in the parent, perhaps mid-reply: the worker starts afresh. A problem host's, or a
                # device pool that could not be made (before its request was sent), leaves the worker as it was: it
                # is kept, with its compiled shapes (H200 call 32: 22 retries, most of them the hosts', each
                # started a worker and compiled again inside a twice larger reservation).
                slot.retire()
            reasons.append(str(err))
            return None
        finally:
            with ledger.phase("verdict_s"):
                slot.release_pool()  # before the reservation ends: the next record admitted finds it free
            self.memory.release(held)
            with ledger.phase("verdict_s"):
                self._free_device_memory(slot.owner, ledger)
        if not alone and record.status != Status.PASSED and says_out_of_memory(record.reason or ""):
            slot.retire()
            reasons.append(record.reason or "")
            return None
        return record

    def _clear_device(self, slot: CandidateSlot, ledger: Ledger) -> None:
        """Before a record runs alone: what the idle lanes hold on the device goes back. Their workers
        (each with its own cache, and mapping the device pool the parent shares with it) are stopped and
        start again at their lane's next record; idle problem hosts likewise. No record is in flight
        then, but waiting for that frees none of this (H200, 2026-12-02: records alone found 1-5 GiB of
        140 free, the parent's pools and idle workers holding the rest, and failed)."""
        with self._lock:
            idle = [s for s in self._active.values() if s is not slot and s.state == "ready"]
        for other in idle:
            other.retire()
        self.hosts.close_idle()
        self._free_device_memory(slot.owner, ledger)

    def _make_cases(self, problem: Problem, workload: Workload, ledger: Ledger) -> tuple[WorkloadCases, RooflinePoint]:
        """The workload's inputs and reference outputs, and its roofline point (a cost hook counts the
        work of the inputs timed, the sets); made on the device by this lane's problem host, holding the
        gate shared."""
        opts = self.options
        with self._hosted(problem, workload, ledger) as (host, ref_fn, gen_fn):
            cases = prepare_cases(problem, workload, base_seed=self.base_seed, device=opts.device,
                                  rounds=opts.rounds, ref_fn=ref_fn, gen_fn=gen_fn, l2_bytes=self.spec.l2_bytes,
                                  edge=opts.edge_rounds, flushed=self.timing.cold_by_flush)
            roof = timed_point(problem, workload, self.spec, cases.axes, [c.inputs for c in cases.sets], host)
        return cases, roof

    @contextmanager
    def _hosted(self, problem: Problem, workload: Workload, ledger: Ledger) -> Iterator[tuple[ProblemHost, Any, Any]]:
        """A problem host lent and started for ``problem``, its reference and generator, with the gate held shared
        for the workload's inputs (device work)."""
        with self._lock:
            folders = set(self._folders)
        # Lent before the gate is held: a lane waiting for a host holds no timing window back.
        with self.hosts.lend(folders) as host:
            host.start(problem)  # its imports are no device work: before the gate is held
            ref_fn, gen_fn = host.functions(problem)
            with self.gate.shared(f"{problem.name}/{workload.name}", "cases", long=True, sink=ledger):
                yield host, ref_fn, gen_fn

    def _new_host(self) -> ProblemHost:
        """A host of the pool; a lane waiting for it steps out of the run's gate (looked up then: a
        caller may replace the gate after this runner is made)."""
        opts = self.options
        host = new_host(opts.device, opts.worker_user, opts.guards, opts.problem_timeout_s, self.transport)
        host.step_out = lambda: self.gate.stepped_out()
        host.awaiting = lambda pid: self.gate.awaiting_worker(pid)
        return host

    def close_hosts(self) -> None:
        """Stop the problem hosts (a later request starts one again)."""
        self.hosts.close()

    def _emit(self, record: ResultRecord, ledger: Ledger) -> None:
        """Hooks, the results file, progress: one record at a time."""
        with self._lock:
            if self._aborted:
                return
            harness = record.harness
            if record.reason:  # problem errors name the problem file by its absolute path
                record.reason = without_harness_root(record.reason)
            if "harness" in record.model_fields_set:
                harness.update({k: round(v, 6) for k, v in ledger.phases.items()})
                harness["wall_s"] = round(ledger.wall(), 6)
            if self.output is not None:  # None: an executor's runner, whose driver writes
                refused = append_record_checked(self.output, record)
                if refused:
                    print(refused, file=sys.stderr)
                    return
            self.records.append(record)
            self.progress.record(record)

    def _slot(self, candidate: CandidateFile, problem: Problem) -> CandidateSlot:
        """The candidate's slot for this problem: the one started ahead for it, or a new one."""
        with self._lock:
            started = self._prestarted.pop((problem.name, str(candidate.path)), None)
        if started is not None:
            return started
        opts = self.options
        # The worker may read the candidate's folder and the problem's (its shapes and reference are public).
        reads = (str(problem.folder.resolve()), *opts.worker_reads)
        return CandidateSlot(candidate, opts.device, guards=opts.guards, account=self.account, reads=reads,
                             inputs=tuple(problem.inputs), problem=problem.name, transport=self.transport,
                             jit=self._jit_store(candidate, problem))

    def _jit_store(self, candidate: CandidateFile, problem: Problem) -> tuple[str, str] | None:
        """(store, key) of the candidate's JIT caches kept between runs, or None (RunOptions.jit_cache)."""
        source = source_digest(candidate.path) if self.options.jit_cache is not None else None
        if source is None:  # no store, or a candidate folder too large to hash: compile afresh
            return None
        env = self.environment
        key = cache_key(source, problem.name, self.options.device, self.device_name,
                        str(env.get("torch")), str(env.get("triton")), str(env.get("cupy")), str(env.get("solbench")))
        return self.options.jit_cache, key

    def discard_started(self, keep: set[tuple[str, str]] = frozenset()) -> None:
        """Stop the workers started ahead for a problem that will not run here (all but ``keep``:
        (problem name, candidate path) keys)."""
        with self._lock:
            gone = [self._prestarted.pop(k) for k in [k for k in self._prestarted if k not in keep]]
        cancelled = self._preparations.cancel(keep)
        for slot in gone:
            slot.retire()
        for prep in cancelled:  # its requests fail once its worker is stopped
            prep.result()
        for slot in gone:  # one a preparation started again meanwhile
            slot.retire()

    def _pause_others(self, timed: int | None) -> Callable[[], None]:
        """Stop every worker of the run but the timed one (``timed``: its pid), each with all it
        started (its process group); the function returned starts them again. On CUDA a worker that
        has not loaded its candidate yet (importing torch, started ahead) goes on: it runs no candidate
        code and touches no device before its load."""
        cpu = not self.options.device.startswith("cuda")
        with self._lock:
            slots = [s for s in [*self._active.values(), *self._prestarted.values()] if cpu or s.state == "ready"]
        groups = [p.pid for s in slots for p in [s.client.proc if s.client is not None else None]
                  if p is not None and p.pid != timed and p.poll() is None]
        stopped = [g for g in groups if _signal_group(g, signal.SIGSTOP)]
        deadline = time.monotonic() + WINDOW_STOP_WAIT_S
        for pid in stopped:  # a stop signal takes effect when the process is next scheduled: wait for it
            _wait_stopped(pid, deadline)
        return lambda: [_signal_group(g, signal.SIGCONT) for g in stopped] and None

    def _retire_active(self) -> None:
        with self._lock:
            active = list(self._active.values())
        for slot in active:
            slot.retire()

    def start_ahead(self, item: PlanItem) -> None:
        """Start the workers of an item expected to run here next (as many as :meth:`_room` allows)."""
        self._spawn_ahead(lanes_of([item]))

    def _start_ahead(self, queue: list[Lane], index: int) -> None:
        """Lane ``index`` starts: start the workers of the lanes after it (they import torch meanwhile)."""
        with self._lock:
            self._begun.add(_key(queue[index]))
        self._spawn_ahead(queue[index + 1:])

    def _spawn_ahead(self, lanes: list[Lane]) -> None:
        """Start the workers of the first lanes not begun yet: ``workers_ahead`` of them (on CUDA at
        least as many as lanes in flight; on the CPU a worker started in its lane holds the gate). They do not load their candidate (which may compile, autotune or
        touch the GPU) until it is their turn."""
        room = self.options.workers_ahead
        if self.options.device.startswith("cuda"):  # on a GPU their imports load the CPU only, not the device
            room = max(room, self.in_flight if self.in_flight > 1 else 0)
        with self._lock:
            for lane in [lane for lane in lanes if _key(lane) not in self._begun][:room]:
                key = _key(lane)
                if key not in self._prestarted:
                    self._prestarted[key] = self._slot(lane.candidate, lane.problem)
                self._prestarted[key].spawn()
            self._prepare_next(lanes)

    def _prepare_next(self, lanes: list[Lane]) -> None:
        """Ask for the first lanes not begun to be made ready ahead (those whose workers were started ahead), as
        many as :attr:`_preparations` runs at once."""
        with self._lock:
            for lane in [lane for lane in lanes if _key(lane) not in self._begun][:self._preparations.workers]:
                slot = self._prestarted.get(_key(lane))
                if slot is not None:
                    self._preparations.ask(_key(lane), lambda cancel, s=slot, ln=lane: self._prepare_ahead(s, ln, cancel))

    def _run_one(self, slot: CandidateSlot, cases: WorkloadCases, roof: RooflinePoint) -> ResultRecord:
        opts = self.options
        ctx = EvaluationContext(cases, opts.device, opts.timeout_s, opts.compile_timeout_s, self.timing,
                                self.environment.get("gpu_uuid"), ledger=slot.ledger or Ledger())
        evaluation = self._evaluate(slot, ctx)
        # The parent's own CPU work holds the gate too: a parent-clocked burst and a timing on the CPU
        # run beside none of it.
        with ctx.ledger.phase("verdict_s"), self.gate.shared(slot.owner, "verdict", sink=ctx.ledger):
            return self._finish(slot, ctx, evaluation, roof)

    def _finish(self, slot: CandidateSlot, ctx: EvaluationContext, evaluation: Evaluation,
                roof: RooflinePoint) -> ResultRecord:
        """The verdict, the record (with its harness times), the hooks."""
        opts, cases = self.options, ctx.cases
        ctx.harness.update(slot.startup)
        used = slot.transport_used()  # the route this record's tensors took, and why memfd if it fell back
        if used["transport"] == "memfd" and self.transport_note:
            used.setdefault("transport_fallback", self.transport_note)
        ctx.harness.update(used)
        slot.startup = {}
        context = ReviewContext(cases.problem, cases.workload, cases.axes, roof, self.spec, slot.candidate, opts.device,
                                cases)
        evaluation = self._verdict(evaluation, context)
        record = build_record(
            problem=cases.problem, workload=cases.workload, axes=cases.axes, candidate=slot.candidate,
            evaluation=evaluation, roof=roof, spec=self.spec, roof_kind=self.roof_kind, device=opts.device,
            device_name=self.device_name, environment=self.environment,
            telemetry=ctx.telemetry or {"available": False, "reason": "not measured (no timing)"},
            log=slot.log(opts.log_bytes), run_id=self.run_id, harness=ctx.harness,
        )
        if evaluation.status != Status.PASSED:
            slot.retire()  # a failed worker may be poisoned (CUDA error, stray threads)
        for hook in self.hooks:
            hook(record, context)
        return record

    def _evaluate(self, slot: CandidateSlot, ctx: EvaluationContext) -> Evaluation:
        failure = slot.ensure_worker(self.options.compile_timeout_s)
        if failure is not None:
            return Evaluation(failure.status, failure.reason, failure.phase)
        return evaluate(slot, ctx)

    def _verdict(self, evaluation: Evaluation, context: ReviewContext) -> Evaluation:
        evaluation = physics_floor(evaluation, context.roof, context.spec)
        if self.options.guards:
            evaluation = review(evaluation, context)
        else:
            evaluation.flags.append(GUARDS_OFF_FLAG)
        if evaluation.findings:
            evaluation.correctness["findings"] = evaluation.findings
        return evaluation

    def _free_device_memory(self, owner: str, ledger: Ledger | None) -> None:
        """Give the parent's cached, unused device memory back, for the workers (device work: shared)."""
        if self.options.device.startswith("cuda"):
            import torch

            with self.gate.shared(owner, "free", sink=ledger):
                torch.cuda.empty_cache()


# A record's attempts: (its reservation's multiple, alone); the last one alone never runs out beside others.
# Alone comes after four times the reservation beside others: while one record waits to run alone every
# other waits behind it, and the device drains (H200 call 27, 2026-12-03: one record alone, 3,467 lane-seconds
# behind it of the 4,450 the records waited for memory; 11 of its 12 retries had passed at twice their reservation).
RETRIES = ((1, False), (2, False), (4, False), (1, True))


def lanes_of(plan: list[PlanItem]) -> list[Lane]:
    """The plan's lanes: per item, one per candidate, in the plan's order (a problem's candidates
    side by side, so they share its inputs and reference outputs while both are in flight)."""
    return [Lane(item.problem, list(item.workloads), c) for item in plan for c in item.candidates]


def _cases_bytes(value: tuple[WorkloadCases, RooflinePoint]) -> int:
    """The parent's bytes of a workload's inputs and reference outputs (rounds and timing sets)."""
    return sum(c.tensor_bytes() for c in [*value[0].rounds, *value[0].sets])


def _wait_stopped(pid: int, deadline: float) -> None:
    """Wait (until ``deadline``) for process ``pid`` to be stopped (or gone), as /proc tells."""
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in (b"T", b"t", b"Z", b"X"):
            return
        time.sleep(0.0005)


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a worker's process group (its session: it and all it started); False if it is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _key(lane: Lane) -> tuple[str, str]:
    return (lane.problem.name, str(lane.candidate.path))
