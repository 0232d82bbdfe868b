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
their guards, and every record is flagged ``guards-off``.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from solbench.data.hardware import HardwareSpec
from solbench.data.problem import Problem, Workload
from solbench.data.record import ResultRecord, Status
from solbench.data.results import append_records
from solbench.data.roofline import RooflinePoint
from solbench.engine.cases import WorkloadCases, prepare_cases
from solbench.engine.environment import collect_environment, device_name
from solbench.engine.evaluation import CandidateSlot, EvaluationContext, evaluate
from solbench.engine.options import GUARDS_OFF_FLAG, RunOptions, resolve_transport, timing_config
from solbench.engine.problem_host import new_host
from solbench.engine.scoring import Evaluation, build_record, physics_floor, resolve_spec
from solbench.engine.work import timed_point
from solbench.guards import make_undumpable, review
from solbench.guards.account import resolve_account
from solbench.worker.candidate import CandidateFile
from solbench.worker.cleanup import stop_on_signals, sweep_dead_workers
from solbench.worker.jitcache import cache_key, source_digest


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
    """What a guard reviewing an evaluation may look at (all trusted, parent-side)."""

    problem: Problem
    workload: Workload
    axes: dict[str, int]
    roof: RooflinePoint
    spec: HardwareSpec
    candidate: CandidateFile
    device: str


@dataclass
class Runner:
    """Runs plans under one set of options: one spec, run id and base seed for all its records."""

    options: RunOptions
    output: Path | None  # None: write nothing, records go to progress.record (solbench.dispatch)
    progress: Progress = field(default_factory=NullProgress)

    def __post_init__(self) -> None:
        self.spec, self.roof_kind = resolve_spec(self.options.device, self.options.gpu)
        self.run_id = uuid.uuid4().hex[:12]
        # Secret unless given: the seeds are never written while the run is going on, so no
        # candidate can read them from an earlier record and predict its inputs.
        self.base_seed = self.options.seed if self.options.seed is not None else secrets.randbits(63)
        if self.options.guards:
            # Best effort: a worker (same user) can no longer ptrace the parent or read its memory
            # (the secret base seed, the reference outputs).
            make_undumpable()
        if self.options.device.startswith("cuda"):
            import torch

            dev = torch.device(self.options.device)
            if dev.index is not None:  # plain "cuda" means the current device
                torch.cuda.set_device(dev)
        self.environment = collect_environment(self.options.device)
        self.environment["seed"] = self.options.seed  # null: a random seed, kept secret
        self.device_name = device_name(self.options.device, self.environment)
        self.records: list[ResultRecord] = []
        self.timing = timing_config(self.options, self.spec.l2_bytes)
        self.account = resolve_account(self.options.worker_user)  # None: workers keep this user
        # device: each worker gets a GPU pool shared with it alone (solbench.worker.devwire); else memfd.
        self.transport, self.transport_note = resolve_transport(self.options)
        self._prestarted: dict[tuple[str, str], CandidateSlot] = {}  # the next problem's workers, started ahead
        # The problems' own code (generators, references, cost hooks) runs in one sandboxed host, kept
        # for every workload; started on first use, stopped at exit (solbench.worker.cleanup).
        opts = self.options
        self.host = new_host(opts.device, opts.worker_user, opts.guards, opts.problem_timeout_s)
        sweep_dead_workers()

    def run(self, plan: list[PlanItem]) -> list[ResultRecord]:
        self.progress.begin(sum(len(p.workloads) * len(p.candidates) for p in plan))
        with stop_on_signals():
            try:
                for i, item in enumerate(plan):
                    self._run_problem(item, plan[i + 1] if i + 1 < len(plan) else None)
            finally:
                self.discard_started()
        return self.records

    def _slot(self, candidate: CandidateFile, problem: Problem) -> CandidateSlot:
        """The candidate's slot for this problem: the one started ahead for it, or a new one."""
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
        for key in [k for k in self._prestarted if k not in keep]:
            self._prestarted.pop(key).retire()

    def _run_problem(self, item: PlanItem, upcoming: PlanItem | None = None) -> None:
        """Run one (problem, candidates) item; ``upcoming``, the item that follows, gets its workers
        started ahead while this one's last candidates run (within ``workers_ahead``)."""
        problem, opts = item.problem, self.options
        ref_fn, gen_fn = self.host.functions(problem)
        slots = [self._slot(c, problem) for c in item.candidates]
        roofs: dict[str, RooflinePoint] = {}
        try:
            for i, slot in enumerate(slots):
                # One candidate at a time: while it runs, no other candidate's code is alive to
                # disturb it (workers started ahead have imported torch, not their candidate).
                self._start_ahead(slots[i + 1:], upcoming)
                for workload in item.workloads:
                    self.progress.task(problem.name, workload.name, slot.candidate.name)
                    # The same seeds for every candidate: all of them see the same inputs.
                    cases = prepare_cases(problem, workload, base_seed=self.base_seed, device=opts.device,
                                          rounds=opts.rounds, ref_fn=ref_fn, gen_fn=gen_fn, l2_bytes=self.spec.l2_bytes,
                                          edge=opts.edge_rounds)
                    if workload.name not in roofs:
                        # A cost hook counts the work of the inputs timed (the sets), not of the shapes.
                        roofs[workload.name] = timed_point(problem, workload, self.spec, cases.axes,
                                                           [c.inputs for c in cases.sets], self.host)
                    record = self._run_one(slot, cases, roofs[workload.name])
                    if self.output is not None:  # None: an executor's runner, whose driver writes
                        append_records(self.output, [record])
                    self.records.append(record)
                    self.progress.record(record)
                    del cases
                    self._free_device_memory()
                slot.retire()
        finally:
            for slot in slots:
                slot.retire()

    def _run_one(self, slot: CandidateSlot, cases: WorkloadCases, roof: RooflinePoint) -> ResultRecord:
        opts = self.options
        ctx = EvaluationContext(cases, opts.device, opts.timeout_s, opts.compile_timeout_s, self.timing,
                                self.environment.get("gpu_uuid"))
        evaluation = self._evaluate(slot, ctx)
        ctx.harness.update(slot.startup)
        used = slot.transport_used()  # the route this record's tensors took, and why memfd if it fell back
        if used["transport"] == "memfd" and self.transport_note:
            used.setdefault("transport_fallback", self.transport_note)
        ctx.harness.update(used)
        slot.startup = {}
        context = ReviewContext(cases.problem, cases.workload, cases.axes, roof, self.spec, slot.candidate, opts.device)
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
        return record

    def _start_ahead(self, upcoming: list[CandidateSlot], next_item: PlanItem | None = None) -> None:
        """Start up to ``workers_ahead`` of the next candidates' workers: they import torch meanwhile;
        the room left goes to the first candidates of the next problem.

        They do not load their candidate (which may compile, autotune or touch the GPU) until it is
        their turn.
        """
        room = self.options.workers_ahead
        for slot in upcoming[:room]:
            slot.spawn()
        room -= len(upcoming[:room])
        for candidate in next_item.candidates[:room] if next_item is not None else ():
            key = (next_item.problem.name, str(candidate.path))
            if key not in self._prestarted:
                self._prestarted[key] = self._slot(candidate, next_item.problem)
            self._prestarted[key].spawn()

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

    def _free_device_memory(self) -> None:
        if self.options.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
