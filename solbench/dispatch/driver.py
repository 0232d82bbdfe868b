"""The driver: runs work items on executors, longest first; the only writer of the results file.

Each executor gets a thread here that hands it one item at a time and forwards its messages to
the driver's loop (one queue), which alone writes records: a record whose key (run, problem,
workload, candidate) was written already is dropped, so a rerun never writes one twice. When an
executor dies or vanishes (a crash, a killed actor, a lost node) the item it held runs once more,
on the workloads that have no record yet, on whichever executor is free first (the lost one is
restarted); lost a second time, or failed for a reason a rerun cannot change, those workloads get a
RUNTIME_ERROR record that says why. Nothing is lost silently.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from solbench.data import HardwareSpec, ResultRecord, Status, append_record_checked, load_problem
from solbench.dispatch.items import WorkItem, record_key, split_plan
from solbench.engine import (
    Evaluation,
    NullProgress,
    PlanItem,
    Progress,
    RunIdentity,
    RunOptions,
    build_record,
    workload_point,
)
from solbench.errors import SolbenchError
from solbench.guards import make_undumpable
from solbench.settings import EXECUTOR_JOIN_S
from solbench.worker import CandidateFile, stop_on_signals

MAX_ATTEMPTS = 2  # an item's run and one rerun after its executor was lost
LOST_FLAG = "executor_lost"


class Handle(Protocol):
    """An executor as the driver drives it (:class:`~solbench.dispatch.local.LocalExecutor`, a Ray actor)."""

    label: str

    def start(self, start: dict[str, Any]) -> dict[str, Any]: ...

    def run(self, item: WorkItem) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


@dataclass
class DispatchResult:
    records: list[ResultRecord]
    run_id: str
    spec_id: str | None


@dataclass
class _Slot:
    index: int
    handle: Handle
    inbox: queue.Queue[WorkItem | None] = field(default_factory=queue.Queue)
    hello: dict[str, Any] | None = None
    thread: threading.Thread | None = None

    @property
    def label(self) -> str:
        host = (self.hello or {}).get("host")
        return f"{self.handle.label}@{host}" if host else self.handle.label


@dataclass
class _State:
    pending: deque[WorkItem]
    attempts: dict[int, int]
    busy: dict[int, WorkItem] = field(default_factory=dict)
    idle: list[int] = field(default_factory=list)
    alive: int = 0
    errors: dict[int, str] = field(default_factory=dict)  # slot -> why its current item cannot run there


class Driver:
    """Schedules items onto executors and writes what comes back (see the module docstring)."""

    def __init__(self, options: RunOptions, output: Path, progress: Progress, start: dict[str, Any]):
        self.options, self.output, self.progress, self.start = options, output, progress, start
        self.run_id: str = start["run_id"]
        self.events: queue.Queue[tuple[str, int, WorkItem | None, Any]] = queue.Queue()
        self.records: list[ResultRecord] = []
        self.written: set[tuple[str, str, str, str]] = set()
        self.duplicates = 0
        self.slots: list[_Slot] = []
        self.last_failure = ""

    # --- executor threads ---------------------------------------------------------------------

    def _serve(self, slot: _Slot) -> None:
        started = self._start(slot)
        while started:
            item = slot.inbox.get()
            if item is None:
                break
            try:
                for message in slot.handle.run(item):
                    self.events.put(("message", slot.index, item, message))
            except Exception as err:  # noqa: BLE001 - ExecutorLost, a Ray error: the item's executor is gone
                self.events.put(("lost", slot.index, item, str(err) or type(err).__name__))
                self._close(slot)
                started = self._start(slot)
        self._close(slot)

    def _start(self, slot: _Slot) -> bool:
        try:
            hello = slot.handle.start(self.start)
        except Exception as err:  # noqa: BLE001 - a start failure is reported, the run goes on elsewhere
            self._close(slot)
            self.events.put(("gone", slot.index, None, f"executor {slot.label} did not start: {err}"))
            return False
        self.events.put(("hello", slot.index, None, hello))
        return True

    @staticmethod
    def _close(slot: _Slot) -> None:
        try:
            slot.handle.close()
        except Exception:  # noqa: BLE001, S110 - closing what is already gone
            pass

    # --- the loop -----------------------------------------------------------------------------

    def run(self, items: list[WorkItem], handles: list[Handle]) -> list[ResultRecord]:
        self.progress.begin(sum(len(item.workloads) for item in items))
        state = _State(deque(items), {item.index: 1 for item in items}, alive=len(handles))
        self.slots = [_Slot(i, h) for i, h in enumerate(handles)]
        for slot in self.slots:
            slot.thread = threading.Thread(target=self._serve, args=(slot,), name=f"executor-{slot.index}",
                                           daemon=True)
            slot.thread.start()
        try:
            self._loop(state)
        finally:
            for slot in self.slots:
                slot.inbox.put(None)
            for slot in self.slots:
                slot.thread.join(EXECUTOR_JOIN_S)
        return self.records

    def _loop(self, state: _State) -> None:
        while state.pending or state.busy:
            if state.alive == 0:
                for item in state.pending:
                    self._fail(item, list(item.workloads), f"no executor left ({self.last_failure})", None)
                return
            kind, index, item, payload = self.events.get()
            if kind == "hello":
                self.slots[index].hello = payload
                state.idle.append(index)
                self._node(index, "ready")
            elif kind == "gone":
                state.alive -= 1
                self.last_failure = payload
            elif kind == "lost":
                state.busy.pop(index, None)
                self._lost(state, item, payload, index)
            elif self._message(state, index, item, payload):
                state.busy.pop(index, None)
                state.idle.append(index)
            self._assign(state)

    def _assign(self, state: _State) -> None:
        while state.idle and state.pending:
            index = state.idle.pop(0)
            item = state.pending.popleft()
            state.busy[index] = item
            # The next pending item, as a hint: with one executor per device it is what comes next.
            ahead = state.pending[0].as_message() if state.pending else None
            self.slots[index].inbox.put(replace(item, ahead=ahead))

    def _message(self, state: _State, index: int, item: WorkItem, message: dict[str, Any]) -> bool:
        """Handle one message of an executor; True when its item is over."""
        kind = message.get("kind")
        if kind == "task":
            self.progress.task(message["problem"], message["workload"], message["candidate"])
            self._node(index, f"{message['problem']} {message['workload']} {message['candidate']}")
        elif kind == "record":
            self._write(ResultRecord.model_validate(message["record"]))
        elif kind == "error":
            state.errors[index] = str(message.get("reason"))
        elif kind == "done":
            missing = self._missing(item)
            if missing:
                reason = state.errors.pop(index, None) or "the executor finished the item without a record for it"
                self._fail(item, missing, reason, index)
            state.errors.pop(index, None)
            self._node(index, "ready")
            return True
        return False

    def _lost(self, state: _State, item: WorkItem, reason: str, index: int) -> None:
        state.errors.pop(index, None)
        missing = self._missing(item)
        if not missing:
            return
        if state.attempts[item.index] < MAX_ATTEMPTS:
            state.attempts[item.index] += 1
            state.pending.appendleft(item.only(missing))  # first in line: the longest items go first
            self._node(index, f"lost: {reason}; its item runs again")
        else:
            self._fail(item, missing, f"{reason}; lost again after one rerun", index)

    # --- records ------------------------------------------------------------------------------

    def _missing(self, item: WorkItem) -> list[str]:
        return [w for w in item.workloads if record_key(self.run_id, item.problem, w, item.candidate) not in self.written]

    def _write(self, record: ResultRecord) -> None:
        key = record_key(record.run_id, record.problem, record.workload, record.solution)
        if key in self.written:
            self.duplicates += 1  # a rerun's copy of a record already written
            return
        self.written.add(key)
        refused = append_record_checked(self.output, record)
        if refused:
            print(refused, file=sys.stderr)
            return
        self.records.append(record)
        self.progress.record(record)

    def _fail(self, item: WorkItem, workloads: list[str], reason: str, index: int | None) -> None:
        """RUNTIME_ERROR records for the workloads of an item that no executor could finish."""
        hello = self._hello(index)
        spec = HardwareSpec.model_validate(hello["spec"])
        problem = load_problem(item.problem_path)
        candidate = CandidateFile(Path(item.candidate_path), item.candidate, item.candidate_sha256)
        for name in workloads:
            workload = problem.workload(name)
            axes = problem.resolve_axes(workload)
            evaluation = Evaluation(Status.RUNTIME_ERROR, reason[:2000], "executor", flags=[LOST_FLAG],
                                    correctness={"failed_in": "executor"})
            record = build_record(
                problem=problem, workload=workload, axes=axes, candidate=candidate, evaluation=evaluation,
                roof=workload_point(problem, workload, spec, axes), spec=spec, roof_kind=hello["roof_kind"],
                device=self.options.device, device_name=hello["device_name"], environment=hello["environment"],
                telemetry={"available": False, "reason": "not measured (no executor finished the item)"}, log="",
                run_id=self.run_id)
            record.device_index, record.host = hello.get("device_index"), hello.get("host")
            self._write(record)

    def _hello(self, index: int | None) -> dict[str, Any]:
        if index is not None and self.slots[index].hello is not None:
            return self.slots[index].hello
        for slot in self.slots:
            if slot.hello is not None:
                return slot.hello
        raise SolbenchError(f"no executor started ({self.last_failure})")

    def _node(self, index: int, activity: str) -> None:
        """Per-executor progress (host and device), for progress objects that show it."""
        hook = getattr(self.progress, "executor", None)
        if hook is not None:
            hook(self.slots[index].label, activity)

    @property
    def spec_id(self) -> str | None:
        for slot in self.slots:
            if slot.hello is not None:
                return slot.hello["spec"].get("id")
        return None


def executor_options(options: RunOptions) -> dict[str, Any]:
    """The run's options as an executor takes them: its one device, no placement of its own."""
    device = "cuda" if options.device.startswith("cuda") else "cpu"
    return options.model_dump(mode="json") | {"device": device, "gpus": None, "jobs": 0, "cluster": None}


def start_message(options: RunOptions) -> dict[str, Any]:
    """What every executor of a run starts from: the options, one run id and one base seed."""
    identity = RunIdentity.new(options.seed)  # the base seed is secret: never written
    return {"options": executor_options(options), "run_id": identity.run_id, "base_seed": identity.base_seed,
            "cwd": os.getcwd()}


def make_executors(options: RunOptions) -> list[Handle]:
    """The executors ``options`` asks for: Ray actors, one per local GPU, or N on the CPU."""
    if options.cluster:
        from solbench.dispatch.ray_cluster import ray_executors

        return ray_executors(options)
    from solbench.dispatch.local import cpu_executors, gpu_executors

    return gpu_executors(options.gpus) if options.gpus else cpu_executors(options.jobs)


def run_dispatched(plan: list[PlanItem], options: RunOptions, output: Path,
                   progress: Progress | None = None, handles: list[Handle] | None = None) -> DispatchResult:
    """Run a plan on executors (``handles``, default: what ``options`` asks for); records go to ``output``."""
    items = split_plan(plan)
    if options.guards:  # this process holds the secret base seed: no worker may read its memory
        make_undumpable()
    handles = handles if handles is not None else make_executors(options)
    driver = Driver(options, output, progress or NullProgress(), start_message(options))
    try:
        with stop_on_signals():
            records = driver.run(items, handles)
    finally:
        if options.cluster and handles:
            from solbench.dispatch.ray_cluster import disconnect

            disconnect()
    return DispatchResult(records, driver.run_id, driver.spec_id)
