"""One candidate on one workload: drive its worker through the rounds and the timing, check everything.

The parent sends inputs, receives raw outputs and raw timing samples, and decides. The sequence:

1. correctness rounds: each sends fresh inputs, checks the outputs against the reference
   (:mod:`solbench.engine.correctness`) and that no input was changed (unless an output is declared
   ``inplace_of`` it, in which case that input must hold the expected output afterwards);
2. timing on the rotating sets (:func:`solbench.timing.time_calls` in the worker), with NVML
   telemetry sampled around it, and right after it the parent-clocked burst that checks the claimed
   time from outside the worker (:mod:`solbench.engine.burst`), while the parent watches the worker's
   processes (CPU time, NVML);
3. the outputs of the timed calls are checked: the last of each set, those of samples the parent
   chose, and the refresh run's, each against the reference for the inputs it saw (the parent's
   edits between samples included: :mod:`solbench.engine.verification`); the sets must come back
   unchanged but for those edits.

Any worker failure ends the evaluation: a timeout is TIMEOUT, a dead worker or a protocol violation
RUNTIME_ERROR, an exception in ``run`` RUNTIME_ERROR with its message.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.data import Problem, Status, Timing, make_inputs
from solbench.engine.burst import FirstBurst, first_burst, run_burst
from solbench.engine.cases import Case, WorkloadCases, derive_seed, message_bytes
from solbench.engine.correctness import MalformedReply, check_outputs, compare_tensors, mutated_inputs
from solbench.engine.gate import DeviceGate
from solbench.engine.ledger import Ledger
from solbench.engine.scoring import Evaluation
from solbench.engine.telemetry import TelemetrySampler
from solbench.engine.verification import (
    TimedPlan,
    already_checked,
    draw_plan,
    reply_bytes,
    request,
    sample_count,
    timed_checks,
)
from solbench.guards import (
    ConcurrencySnapshot,
    Finding,
    Observer,
    check_concurrency,
    descendant_processes,
    device_findings,
    other_process_work,
)
from solbench.settings import EXITING_PROCESS_GRACE_S, RELEASE_TIMEOUT_S, WORKER_START_TIMEOUT_S
from solbench.timing import TimingConfig, TimingError, restate
from solbench.worker import CandidateFile, WorkerClient, WorkerFailure, pool_bytes

_IMPORT = "the import of the candidate"
# Requests timed (by the worker's clock or the parent's), and a call under a profiler (its kernels
# replayed and counted: solbench profile): the device alone.
EXCLUSIVE = ("time", "burst", "profile")
_HARNESS_ROOT = str(Path(__file__).resolve().parents[2]) + "/"  # the checkout (or site-packages) holding solbench


def without_harness_root(text: str) -> str:
    """``text`` with paths under the harness's root written relative to it (a record names no machine's folders)."""
    return text.replace(_HARNESS_ROOT, "")


@dataclass
class CandidateSlot:
    """A candidate and its worker, reused across workloads while it stays healthy.

    The worker goes through ``spawned`` (importing torch; may happen ahead of its turn) ->
    ``loading`` (importing the candidate) -> ``ready``. A load that fails (compile error, crash or
    timeout while importing) is remembered: every later workload of the candidate gets the same
    result without importing it again. So is a first call that ran out of the compile timeout: the
    first calls of its later workers get the workload's timeout only.
    """

    candidate: CandidateFile
    device: str
    guards: bool = True  # off: the worker runs without its guards (RunOptions.guards)
    account: tuple[int, int] | None = None  # (uid, gid) the worker runs as (RunOptions.worker_user), or None
    reads: tuple[str, ...] = ()  # more folders the worker may read (RunOptions.worker_reads)
    inputs: tuple[str, ...] | None = None  # the problem's input names: run() must take them (checked at load)
    problem: str = ""
    launcher: tuple[str, ...] = ()  # a profiler the worker runs under (solbench profile: ncu ...)
    transport: str = "memfd"  # device or memfd: how its worker's tensors travel (RunOptions.transport, resolved)
    jit: tuple[str, str] | None = None  # (store, key): JIT caches kept between runs (RunOptions.jit_cache)
    client: WorkerClient | None = None
    state: str = "none"  # none | spawned | loading | ready
    load_failure: Evaluation | None = None
    load_log: str = ""
    load_sent_at: float = 0.0
    first_call: bool = True  # the next call is the worker's first: it gets the compile timeout
    first_call_timed_out: bool = False  # a first call ran out of the compile timeout: no second one
    primed: bool = False  # the worker built what its timer builds once (the "prime" request), before a window
    has_setup: bool = False  # the candidate defines setup(...): called once per workload, untimed
    log_start: int = 0
    startup: dict[str, float] = field(default_factory=dict)  # start and load times, for the next record
    # The run's device gate (solbench.engine.gate): every request holds it, shared or, to be timed,
    # alone. None: nothing else runs on the device to exclude.
    gate: DeviceGate | None = None
    ledger: Ledger | None = None  # the current record's: its waits for the gate are charged there
    owner: str = ""  # the current record (problem/workload/candidate), for the gate's log

    def spawn(self) -> None:
        """Start the worker process now; it imports torch while other work goes on."""
        if self.load_failure is None and self.client is None:
            self.client = WorkerClient(self.device, guards=self.guards, account=self.account,
                                       reads=self._readable(), launcher=self.launcher, transport=self.transport,
                                       jit=self.jit)
            self.client.spawn()
            self.state, self.first_call, self.log_start = "spawned", not self.first_call_timed_out, 0
            self.primed = False

    def _readable(self) -> tuple[str, ...]:
        """The candidate's folder (where it is and where a link to it leads) and the run's extra ones."""
        path = Path(self.candidate.path)
        return tuple(dict.fromkeys([str(path.absolute().parent), str(path.resolve().parent), *self.reads]))

    def access(self, kind: str, long: bool = False) -> AbstractContextManager[None]:
        """Hold the device gate for a request of this worker (a timed one, :data:`EXCLUSIVE`: alone; else shared)."""
        if self.gate is None:
            return nullcontext()
        pid = self.client.proc.pid if self.client is not None and self.client.proc is not None else None
        if kind in EXCLUSIVE:  # a burst follows its own timing moments later: no batch to wait for
            return self.gate.exclusive(self.owner, kind, pid=pid, sink=self.ledger, urgent=kind == "burst")
        return self.gate.shared(self.owner, kind, long=long, pid=pid, sink=self.ledger)

    def wait_up(self) -> None:
        """Start the worker unless started ahead, and wait for it to be up (importing torch). On the
        CPU a start here holds the gate: its imports load the cores a timing runs on."""
        if self.load_failure is not None:
            return
        here = self.state == "none" and not self.device.startswith("cuda")
        with self.access("start", long=True) if here else nullcontext():
            waited = time.monotonic()
            self.spawn()
            self._wait_ready(waited)

    def _wait_ready(self, waited: float | None = None) -> None:
        if self.state != "spawned" or self.client is None or self.client.ready:
            return
        waited = time.monotonic() if waited is None else waited
        self.client.wait_ready(WORKER_START_TIMEOUT_S)
        self.startup["worker_wait_s"] = time.monotonic() - waited  # what a worker started ahead did not hide

    def send_load(self, compile_timeout_s: float) -> None:
        """Wait for the worker to be up and ask it to import the candidate (the reply is read later)."""
        self.spawn()
        if self.state != "spawned" or self.client is None:
            return
        self._wait_ready()
        self.load_sent_at = time.monotonic()
        try:
            self.client.send({"op": "load", "path": str(self.candidate.path), "device": self.device,
                              "inputs": list(self.inputs) if self.inputs is not None else None,
                              "problem": self.problem}, compile_timeout_s)
        except WorkerFailure as err:
            self._load_failed(failure_from_worker(err, _IMPORT, _compile_limit(compile_timeout_s)))
            return
        self.state = "loading"

    def ensure_worker(self, compile_timeout_s: float) -> Evaluation | None:
        """Make sure a loaded worker is ready. Returns the load failure, or None when ready."""
        self.wait_up()
        if self.state == "spawned" or self.state == "loading":
            with self.access("load", long=True):  # the import may touch the device (CUDA init, compile)
                return self._load(compile_timeout_s)
        return self._load(compile_timeout_s)

    def _load(self, compile_timeout_s: float) -> Evaluation | None:
        self.send_load(compile_timeout_s)
        if self.load_failure is not None:
            return self.load_failure
        assert self.client is not None
        if self.state == "loading":
            left = max(self.load_sent_at + compile_timeout_s - time.monotonic(), 0.001)
            try:
                reply = self.client.receive(left, 0)
            except WorkerFailure as err:
                return self._load_failed(failure_from_worker(err, _IMPORT, _compile_limit(compile_timeout_s)))
            if reply.get("ok") is not True:
                return self._load_failed(failure_from_reply(reply, _IMPORT))
            self.state, self.has_setup = "ready", reply.get("setup") is True
            self.startup.update(worker_start_s=self.client.up_at - self.client.spawned_at,
                                load_s=time.monotonic() - self.load_sent_at)
            if self.jit is not None:  # a first call with a warm cache compiles less: say so
                self.startup["jit_cache_restored_bytes"] = self.client.jit_restored_bytes
        else:
            self.log_start = self.client.log_size()
        return None

    def transport_used(self) -> dict[str, str]:
        """For the record's harness section: the route its tensors took, and why it fell back if it did."""
        client = self.client
        used = {"transport": client.transport if client is not None else self.transport}
        if client is not None and client.transport_note:
            used["transport_fallback"] = client.transport_note
        return used

    def _load_failed(self, failure: Evaluation) -> Evaluation:
        self.load_failure = failure
        if self.client is not None:
            self.client.close()
            self.load_log = self.client.read_log(0, 1 << 20)
        self.retire()
        return failure

    def log(self, log_bytes: int) -> str:
        """The candidate's own output since its workload began: the last ``log_bytes`` (0: none), with
        paths under the harness's root written relative to it (a record names no machine's folders)."""
        if log_bytes <= 0:
            return ""
        text = self.load_log[-log_bytes:] if self.client is None else self.client.read_log(self.log_start, log_bytes)
        return without_harness_root(text)

    def release_pool(self) -> None:
        """Between records: the worker's large device pool goes back (:meth:`WorkerClient.release_pool`),
        holding the gate shared (freeing device memory synchronises the device: never inside a window).
        A worker that does not answer is stopped: its lane starts another."""
        if self.client is None or self.client.pool is None:
            return
        try:
            with self.access("release"):
                self.client.release_pool(RELEASE_TIMEOUT_S)
        except WorkerFailure:
            self.retire()

    def retire(self) -> None:
        if self.client is not None:
            self.client.discard()
            self.client = None
        self.state = "none"


def failure_from_worker(err: WorkerFailure, phase: str, limit: str) -> Evaluation:
    """``limit`` names the timeout that ran out, e.g. 'the compile timeout (600 s)'."""
    if err.kind == "timeout":
        return Evaluation(Status.TIMEOUT, f"{limit} ran out during {phase}; the worker's process group was killed",
                          phase)
    return Evaluation(Status.RUNTIME_ERROR, f"{err.message} during {phase}", phase)


def _compile_limit(seconds: float) -> str:
    return f"the compile timeout ({seconds:g} s)"


def failure_from_reply(reply: dict[str, Any], phase: str) -> Evaluation:
    message = str(reply.get("message", "no message"))[:2000]
    if reply.get("kind") == "compile":
        return Evaluation(Status.COMPILE_ERROR, message, phase)
    if reply.get("kind") == "runtime":
        return Evaluation(Status.RUNTIME_ERROR, f"{message} (during {phase})", phase)
    return Evaluation(Status.RUNTIME_ERROR, f"worker protocol violation during {phase}: {message}", phase)


@dataclass
class EvaluationContext:
    cases: WorkloadCases
    device: str  # "cpu" or "cuda[:N]"
    timeout_s: float
    compile_timeout_s: float
    timing_config: TimingConfig
    gpu_uuid: str | None = None
    telemetry: dict[str, Any] = field(default_factory=dict)
    harness: dict[str, float] = field(default_factory=dict)  # where the harness's wall time went
    ledger: Ledger = field(default_factory=Ledger)  # the record's waits (solbench.engine.ledger)
    # Called once the record's last timed request (the burst) is done: device work that must not
    # overlap this candidate's timing may start beside the rest (solbench profile warms its worker
    # under ncu then).
    after_timed: Callable[[], None] | None = None

    def clock(self) -> float:
        """The work clock: stops while the record waits for the device (deadlines and phases count work)."""
        return self.ledger.clock()

    @property
    def device_type(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"


class _Stop(Exception):
    def __init__(self, evaluation: Evaluation):
        self.evaluation = evaluation


def _check_call(ctx: EvaluationContext, case: Case, reply: dict[str, Any], where: str) -> dict[str, Any]:
    """Check one call's outputs and inputs (either may be absent from ``reply`` for a timed call's
    check); raise _Stop(INCORRECT) on the first problem."""
    tol = ctx.cases.tolerance
    result: dict[str, Any] = {}
    if "outputs" in reply:
        check = check_outputs(reply.get("outputs"), case.expected, ctx.device_type, tol.atol, tol.rtol,
                              tol.max_mismatch_ratio)
        if not check.passed:
            raise _Stop(Evaluation(Status.INCORRECT, f"{where}: {check.reason}", where))
        result = check.as_dict()
    if "inputs_after" in reply:
        _check_inputs(ctx, case, reply["inputs_after"], where)
    return result


def _check_inputs(ctx: EvaluationContext, case: Case, after: Any, where: str) -> None:
    """No input changed, but those an output is declared ``inplace_of``, which must hold it."""
    problem, tol = ctx.cases.problem, ctx.cases.tolerance
    inplace = {spec.inplace_of: name for name, spec in problem.outputs.items() if spec.inplace_of}
    changed = mutated_inputs(case.inputs, after, allowed=set(inplace))
    if changed:
        raise _Stop(Evaluation(Status.INCORRECT, f"{where}: mutated input {', '.join(changed)} (declare an output "
                                                 "with inplace_of to write an input in place)", where))
    names = list(case.inputs)
    for inp, out in inplace.items():
        now = after[names.index(inp)]
        ref = case.expected[out]
        ok = hasattr(now, "shape") and tuple(now.shape) == tuple(ref.shape) and now.dtype == ref.dtype
        if not ok or not compare_tensors(now, ref, tol.atol, tol.rtol, tol.max_mismatch_ratio).passed:
            raise _Stop(Evaluation(Status.INCORRECT, f"{where}: output {out!r} is declared in place of input "
                                                     f"{inp!r}, but that input does not hold it after the call", where))


def _request(slot: CandidateSlot, header: dict[str, Any], timeout_s: float, max_bytes: int,
             phase: str, limit: str, awaiting: Callable[[], AbstractContextManager[None]] | None = None
             ) -> dict[str, Any]:
    assert slot.client is not None
    awaiting = awaiting or (slot.gate.awaiting_worker if slot.gate else None)
    try:
        reply = slot.client.request(header, timeout_s, max_bytes, awaiting)
    except WorkerFailure as err:
        raise _Stop(failure_from_worker(err, phase, limit)) from None
    if reply.get("ok") is not True:
        raise _Stop(failure_from_reply(reply, phase))
    return reply


def _valid_timing(timing: Any) -> dict[str, Any]:
    """The worker's timing with every statistic recomputed here from its raw samples, holding only the record's
    declared timing keys, of their types (the worker's reply is the candidate's to forge)."""
    if not isinstance(timing, dict):
        raise MalformedReply("timing is not an object")
    try:
        timing = restate(timing)
        Timing.model_validate(timing)
    except TimingError as err:
        raise MalformedReply(str(err)) from None
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        where = ascii(".".join(str(p) for p in first["loc"])[:80])
        raise MalformedReply(f"timing key {where}: {first['msg']}") from None
    return timing


def expected_outputs(problem: Problem, axes: dict[str, int]) -> list[dict[str, Any]]:
    """What a call's reply describes of each output (the worker's ``expect``): shape and dtype."""
    return [{"shape": list(problem.shape(n, axes) or ()), "dtype": s.dtype} for n, s in problem.outputs.items()]


def evaluate(slot: CandidateSlot, ctx: EvaluationContext) -> Evaluation:
    """Rounds, timing, re-check of the timed outputs. The slot's worker must be loaded."""
    cases = ctx.cases
    problem = cases.problem
    expect = expected_outputs(problem, cases.axes)
    deadline = ctx.clock() + ctx.timeout_s
    workload_limit = f"the workload's timeout ({ctx.timeout_s:g} s, after the first call)"
    findings: list[dict[str, Any]] = []
    rounds: list[dict[str, Any]] = []
    correctness: dict[str, Any] = {"atol": cases.tolerance.atol, "rtol": cases.tolerance.rtol,
                                   "max_mismatch_ratio": cases.tolerance.max_mismatch_ratio, "rounds": rounds}
    phase = "round 1"
    timing: dict[str, Any] = {}
    clock = ctx.clock()
    first = False
    try:
        if slot.has_setup:
            phase = "setup"
            _add_findings(findings, _run_setup(slot, ctx))
            deadline, clock = ctx.clock() + ctx.timeout_s, ctx.clock()
        for r, case in enumerate(cases.rounds):
            phase = f"round {r + 1}"
            # The first call of a fresh worker may compile (Triton JIT, load_inline): it gets the
            # compile timeout, and the workload's own timeout starts after it.
            first = slot.first_call
            slot.first_call = False
            limit = ctx.compile_timeout_s if first else max(deadline - ctx.clock(), 0.001)
            with slot.access("round", long=first):  # a first call may compile: long
                reply = _request(slot, {"op": "call", "inputs": list(case.inputs.values()), "expect": expect},
                                 limit, message_bytes([case]), phase,
                                 _compile_limit(ctx.compile_timeout_s) if first else workload_limit)
            if first:
                deadline = ctx.clock() + ctx.timeout_s
                ctx.harness["first_call_s"] = ctx.clock() - clock
            _add_findings(findings, _findings(reply) + processes_left(slot))
            with slot.access("check"):  # the comparison may run on the device
                rounds.append({"round": r + 1, "outputs": _check_call(ctx, case, reply, phase)})
        ctx.harness["rounds_s"] = ctx.clock() - clock
        clock = ctx.clock()
        phase = "timing"
        config = dataclasses.asdict(dataclasses.replace(ctx.timing_config, set_bytes=cases.sets[0].input_bytes()))
        # The refresh set's inputs and references, the first burst made ready (its case, and on a GPU its
        # edits and room, with the device pool grown for the timing too): device work, untimed.
        with slot.access("draw"):
            if not slot.primed and ctx.device_type == "cuda":  # the timer's first-time costs, out of the window
                _request(slot, {"op": "prime", "config": config}, max(deadline - ctx.clock(), 0.001), 0, phase,
                         workload_limit)
                slot.primed = True
            plan = draw_plan(cases, ctx.timing_config.min_samples)
            header = {"op": "time", "sets": [list(c.inputs.values()) for c in cases.sets], "expect": expect,
                      "config": config, "verify": request(plan, cases)}
            first_burst = _first_burst(slot, ctx, header, deadline, workload_limit)
        window = _Window(slot, ctx)  # the parent's own view of the worker from here to the burst's end
        parts = _WindowClock()
        # The timing, then the burst (clocked by the parent), in one window alone: the first burst is run
        # before the window is let go (a window of its own waited for every untimed hold in flight
        # to end, and every other lane waited meanwhile: H200, 2026-12-02, 0.9 s a record from the timing's
        # end to the burst's start); judging it and the references of its checked calls are shared work.
        with ExitStack() as alone:
            alone.enter_context(slot.access("time"))
            parts.start()
            reply = _timing_request(slot, ctx, header, plan, deadline, workload_limit, parts)
            ctx.harness["timing_request_s"] = ctx.clock() - clock
            clock = ctx.clock()
            _add_findings(findings, _findings(reply) + processes_left(slot))
            timing = _valid_timing(reply.get("timing"))
            parts.mark("check_s")
            phase = "burst"
            # Its deadline on the monotonic clock (ours counts work only: the waits so far added back).
            _burst(slot, ctx, window, (plan, sample_count(reply), timing, expect, first_burst),
                   deadline + ctx.ledger.waited, correctness, parts.closing(alone.close))
        ctx.harness["window"] = parts.summary()
        _add_findings(findings, window.findings())
        ctx.harness["burst_s"] = ctx.clock() - clock
        if ctx.after_timed is not None:
            ctx.after_timed()
        clock = ctx.clock()
        phase = "timing"
        with slot.access("recheck"):  # references for edited inputs, comparisons: device work
            correctness["timed"] = _recheck_timed(ctx, reply, plan)
        ctx.harness["recheck_s"] = ctx.clock() - clock
        if cases.edge:
            clock, phase = ctx.clock(), "edge rounds"
            ctx.harness["edge_prepare_s"] = cases.edge_prepare_s
            correctness["edge"] = {"run": [], "skipped": [], "failed": []}
            _edge_rounds(slot, ctx, correctness["edge"], findings)
            ctx.harness["edge_s"] = ctx.clock() - clock
        phase = "done"
    except _Stop as stop:
        _charge_failed(ctx, phase, clock)
        ev = stop.evaluation
        # A first call that hung through the compile timeout gets no second one in later workloads.
        slot.first_call_timed_out = slot.first_call_timed_out or (first and ev.status == Status.TIMEOUT)
        ev.correctness = correctness | {"failed_in": ev.phase}
        ev.findings = findings
        ev.timing = timing  # kept when the re-check of the timed outputs failed
        return ev
    except MalformedReply as err:
        _charge_failed(ctx, phase, clock)
        return Evaluation(Status.RUNTIME_ERROR, f"worker protocol violation in {phase}: {err}", phase,
                          correctness=correctness, findings=findings)
    correctness["passed"] = True
    return Evaluation(Status.PASSED, None, phase, timing=timing, correctness=correctness, findings=findings)


class _WindowClock:
    """Where a record's timing window (the device held alone) went, marked as it goes: ``harness.window``."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self.notes: dict[str, float] = {}
        self._start = self._last = 0.0
        self._end: float | None = None

    def start(self) -> None:
        self._start = self._last = time.monotonic()

    def mark(self, name: str) -> float:
        """The time since the last mark, charged to ``name``; returns now."""
        now = time.monotonic()
        self.parts[name] = self.parts.get(name, 0.0) + now - self._last
        self._last = now
        return now

    def note(self, **seconds: float) -> None:
        """Pieces of a part, kept beside it (not added to the window's sum)."""
        self.notes.update(seconds)

    def closing(self, release: Callable[[], None]) -> Callable[[], None]:
        """``release`` (the window let go), with the burst's part and the window's end marked first."""

        def close() -> None:
            self.mark("burst_s")
            self._end = time.monotonic()
            release()

        return close

    def summary(self) -> dict[str, float] | None:
        if not self._start:
            return None
        alone = (self._end if self._end is not None else self._last) - self._start
        return {"alone_s": round(alone, 6)} | {k: round(v, 6) for k, v in {**self.parts, **self.notes}.items()}


def _first_burst(slot: CandidateSlot, ctx: EvaluationContext, header: dict[str, Any], deadline: float,
                 limit: str) -> FirstBurst:
    """The first burst made ready before the window (:func:`solbench.engine.burst.first_burst`); on the
    device route its room holds the timing request too."""
    room = pool_bytes if slot.transport_used()["transport"] == "device" else None

    def send(msg: dict[str, Any], timeout_s: float, max_bytes: int) -> dict[str, Any]:
        return _request(slot, msg, timeout_s, max_bytes, "the burst's room", limit)

    return first_burst(send, ctx.cases, header["expect"], ctx.device_type, max(deadline - ctx.clock(), 0.001),
                       room, pool_bytes(header) if room is not None else 0)


def _timing_request(slot: CandidateSlot, ctx: EvaluationContext, header: dict[str, Any], plan: TimedPlan,
                    deadline: float, limit: str, parts: _WindowClock) -> dict[str, Any]:
    """The timing request with NVML's telemetry around it (into ``ctx.telemetry``); its reply."""
    sampler = TelemetrySampler(ctx.device, ctx.gpu_uuid)
    sampler.start()
    parts.mark("telemetry_s")
    began, awaited = time.monotonic(), [0.0, 0.0]

    @contextmanager
    def awaiting() -> Iterator[None]:  # the request sent; the worker's reply awaited (the driver may lock others)
        awaited[0] = time.monotonic()
        with slot.gate.awaiting_worker() if slot.gate is not None else nullcontext():
            yield
        awaited[1] = time.monotonic()

    try:
        return _request(slot, header, max(deadline - ctx.clock(), 0.001),
                        message_bytes(ctx.cases.sets) + reply_bytes(plan), "timing", limit, awaiting)
    finally:
        end = parts.mark("request_s")
        if awaited[1]:
            parts.note(send_s=awaited[0] - began, read_s=end - awaited[1])
        sampler.stop()
        ctx.telemetry.update(sampler.result())
        parts.mark("telemetry_s")


def _charge_failed(ctx: EvaluationContext, phase: str, clock: float) -> None:
    """The phase a failure ended, charged up to the failure (the record's wall stays accounted for)."""
    if phase == "setup":
        key = "setup_s"
    elif phase.startswith("round"):
        key = "rounds_s"
    elif phase == "burst":
        key = "burst_s"
    elif phase.startswith("edge"):
        key = "edge_s"
    else:
        key = "recheck_s" if "timing_request_s" in ctx.harness else "timing_request_s"
    ctx.harness.setdefault(key, ctx.clock() - clock)


def _edge_rounds(slot: CandidateSlot, ctx: EvaluationContext, report: dict[str, list],
                 findings: list[dict[str, Any]]) -> None:
    """The edge rounds (:mod:`solbench.engine.edge`), each checked like a correctness round; the first
    failure raises _Stop, INCORRECT (an exception in run() too: the inputs are legal) with the round
    named. The first call at each new shape or layout gets the compile timeout (it may recompile),
    the others the workload's."""
    problem, tol = ctx.cases.problem, ctx.cases.tolerance
    compiled: set[tuple] = set()
    deadline = ctx.clock() + ctx.timeout_s
    for r in ctx.cases.edge:
        if r.skipped:
            report["skipped"].append(r.entry())
            continue
        where = f"edge round {r.name!r}"
        at = f" (at the {r.shape} shape, {', '.join(f'{k}={v}' for k, v in r.axes.items())})"
        signature = (tuple(r.axes.items()), repr(r.layouts))
        first = signature not in compiled
        new_shape = not any(sig[0] == signature[0] for sig in compiled)
        compiled.add(signature)
        limit = ctx.compile_timeout_s if first else max(deadline - ctx.clock(), 0.001)
        expect = expected_outputs(problem, r.axes)
        case = Case(0, r.inputs, r.expected)
        try:
            if slot.has_setup and new_shape and r.axes != ctx.cases.axes:
                _edge_setup(slot, ctx, r.axes, findings)  # setup may plan for shapes: it sees this one first
            with slot.access("edge", long=first):  # a call at a new shape may recompile: long
                reply = _request(slot, {"op": "call", "inputs": r.sent, "expect": expect, "layouts": r.layouts},
                                 limit, case.tensor_bytes() + 4096, where,
                                 _compile_limit(ctx.compile_timeout_s) if first else "the workload's timeout")
            _add_findings(findings, _findings(reply) + processes_left(slot))
            with slot.access("check"):  # the comparison may run on the device
                check = check_outputs(reply.get("outputs"), r.expected, ctx.device_type, r.atol, tol.rtol,
                                      tol.max_mismatch_ratio)
                if not check.passed:
                    raise _Stop(Evaluation(Status.INCORRECT, f"{where}: {check.reason}", where))
                _check_inputs(ctx, case, reply.get("inputs_after"), where)
        except _Stop as stop:
            ev = stop.evaluation
            status = Status.INCORRECT if ev.status == Status.RUNTIME_ERROR else ev.status
            reason = ev.reason if (ev.reason or "").startswith(where) else f"{where}: {ev.reason}"
            report["failed"].append(r.entry(reason + at))
            raise _Stop(Evaluation(status, reason + at, where)) from None
        report["run"].append(r.entry())


class _Window:
    """What the parent sees of the worker from outside over the timing and the burst: its CPU time (the
    burst's evidence on the CPU), and, as guards' findings, the processes it started that worked then
    (CPU time; on a GPU, NVML's processes and utilisation)."""

    def __init__(self, slot: CandidateSlot, ctx: EvaluationContext):
        proc = slot.client.proc if slot.client is not None else None
        self.pid = proc.pid if proc is not None else None
        self.group = _group(slot)
        self.guards = slot.guards
        self.observer = Observer(self.pid, ctx.device, ctx.gpu_uuid) if self.pid is not None else None
        self.whole = self.observer.start() if self.observer is not None else None

    def findings(self) -> list[dict[str, Any]]:
        if self.whole is None or self.pid is None or not self.guards:
            return []
        seen = self.whole()
        found = other_process_work(seen, "the timing and the burst")
        found += device_findings(seen, self.pid, descendant_processes(self.pid, self.group))
        return [f.as_dict() for f in found]


def _burst(slot: CandidateSlot, ctx: EvaluationContext, window: _Window, timed: tuple[Any, ...], deadline: float,
           correctness: dict[str, Any], release: Callable[[], None]) -> None:
    """The parent-clocked burst (:mod:`solbench.engine.burst`); its summary goes into ``correctness``.
    ``release`` lets go of the window alone the caller holds (its timing's), in which the first burst runs."""
    plan, samples, timing, expect, first = timed
    limit = f"the workload's timeout ({ctx.timeout_s:g} s, after the first call)"

    def request(header: dict[str, Any], timeout_s: float, max_bytes: int) -> dict[str, Any]:
        return _request(slot, header, timeout_s, max_bytes, "the burst", limit)

    observe = window.observer.start if window.observer is not None else None
    memfd = slot.transport_used()["transport"] == "memfd"
    summary, verdict = run_burst(request, ctx.cases, plan, samples, timing, expect, ctx.device_type, deadline, observe,
                                 (lambda: slot.access("burst"), lambda: slot.access("burst_untimed")), memfd, release,
                                 first)
    correctness["burst"] = summary
    if verdict is not None:
        raise _Stop(Evaluation(verdict.status, verdict.reason, "burst"))


def _edge_setup(slot: CandidateSlot, ctx: EvaluationContext, axes: dict[str, int],
                findings: list[dict[str, Any]]) -> None:
    """The candidate's setup(...) again before the edge rounds at another shape, on a setup case of that
    shape (its own seed: never a round's inputs)."""
    cases = ctx.cases
    seed = derive_seed(cases.verify_seed, "edge-setup", *sorted(axes.items()))
    with slot.access("setup", long=True):  # may compile or autotune; its inputs are made on the device
        inputs = list(make_inputs(cases.problem, axes, seed, device=cases.device, generator_fn=cases.generator).values())
        reply = _request(slot, {"op": "setup", "inputs": inputs}, ctx.compile_timeout_s, 4096, "setup (edge rounds)",
                         _compile_limit(ctx.compile_timeout_s))
    _add_findings(findings, _findings(reply) + processes_left(slot))


def setup_inputs(cases: WorkloadCases) -> list[Any]:
    """The setup case: inputs of the workload's shapes from a seed of their own (derived from the
    secret one), used for no round and no timing set, so whatever setup derives from their values
    is stale for every call it could be served to."""
    seed = derive_seed(cases.verify_seed, "setup")
    return list(make_inputs(cases.problem, cases.axes, seed, device=cases.device, generator_fn=cases.generator).values())


def _run_setup(slot: CandidateSlot, ctx: EvaluationContext) -> list[dict[str, Any]]:
    """The candidate's setup(...), untimed, within the compile timeout (it may compile or autotune)."""
    clock = ctx.clock()
    with slot.access("setup", long=True):  # may compile or autotune
        header = {"op": "setup", "inputs": setup_inputs(ctx.cases)}
        reply = _request(slot, header, ctx.compile_timeout_s, 4096, "setup", _compile_limit(ctx.compile_timeout_s))
    ctx.harness["setup_s"] = ctx.clock() - clock
    return _findings(reply) + processes_left(slot)


def _findings(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The worker's findings, each as the record declares one (what is not a finding is left out, as the
    guards' review leaves it out)."""
    f = reply.get("findings", [])
    if not isinstance(f, list) or not all(isinstance(x, dict) for x in f):
        raise MalformedReply("findings must be a list of objects")
    return [finding.as_dict() for finding in map(Finding.from_dict, f) if finding is not None]


def _add_findings(findings: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Append, skipping repeats (the worker and the parent may both see the same process)."""
    seen = {(f.get("kind"), f.get("reason")) for f in findings}
    for f in new:
        if (f.get("kind"), f.get("reason")) not in seen:
            seen.add((f.get("kind"), f.get("reason")))
            findings.append(f)


def processes_left(slot: CandidateSlot) -> list[dict[str, Any]]:
    """The parent's own view of the worker after a reply: any live process it has left running.

    Read from /proc by the parent, so a candidate that silences the worker's guards cannot hide
    it. The worker itself starts no processes (Inductor compiles in-process), so the baseline is
    none at all; threads are not visible from outside (native thread pools start lazily anyway).
    A guard: nothing is looked at when the slot runs without the guards.
    """
    proc = slot.client.proc if slot.client is not None else None
    if not slot.guards or proc is None:
        return []
    # The baseline is nothing at all: not read (each read of the processes was a scan of /proc).
    baseline = ConcurrencySnapshot(proc.pid, frozenset(), frozenset(), frozenset(), _group(slot))
    return [f.as_dict() for f in check_concurrency(baseline, native=False, grace_s=EXITING_PROCESS_GRACE_S)]


def _group(slot: CandidateSlot) -> str | None:
    """The worker's own cgroup folder (its processes are listed there) where it runs as another user, who
    cannot move a process out of it nor make a group below it (the folders are this process's); else None
    (the processes are found by their parents, in /proc)."""
    client = slot.client
    if client is None or client.cgroup is None or client.account is None:
        return None
    return str(client.cgroup)


def _recheck_timed(ctx: EvaluationContext, reply: dict[str, Any], plan: TimedPlan) -> dict[str, Any]:
    """The timed outputs (last per set, the kept samples, the refresh run) against the reference for
    the inputs each saw; the sets must be unchanged but for the parent's own edits and refresh."""
    checks = timed_checks(ctx.cases, plan, reply)
    outputs = [c for c in checks if "outputs" in c[2]]
    if len(outputs) < 2:  # the refresh run and at least one timed call
        raise MalformedReply("no timed output came back")
    done: list[tuple[Case, Any]] = []
    for where, case, part in checks:
        if "outputs" in part and already_checked(done, case, part["outputs"]):
            part = {k: v for k, v in part.items() if k != "outputs"}
        _check_call(ctx, case, part, where)
        if "outputs" in part:
            done.append((case, part["outputs"]))
    return {"sets": len(ctx.cases.sets), "outputs_checked": len(outputs), "samples": reply["samples"],
            "kept_samples": len(reply["kept"]),
            "edits_applied": sum(e.sample < reply["samples"] for e in plan.edits),
            "refresh_set": plan.refresh_set + 1, "passed": True}
