"""An executor's core: one Runner on one device that runs work items and hands back their records as data.

The same code serves a local executor process (:mod:`solbench.dispatch.executor`) and a Ray actor
(:mod:`solbench.dispatch.ray_cluster`). It writes no file: each record goes back to the driver as
a message. Messages, all JSON-ready dicts with a ``kind``:

* ``hello``: the executor's host, device index, spec, device name and environment (the driver
  needs them to write a record for an item no executor could finish);
* ``task`` (problem, workload, candidate), when a workload starts;
* ``record``: one record, tagged with the executor's ``device_index`` and ``host``;
* ``error``: the item could not run here (its problem or candidate file is missing or differs);
* ``done``: the item is over, last.
"""

from __future__ import annotations

import hashlib
import os
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from solbench.data import ResultRecord, load_problem
from solbench.dispatch.items import WorkItem
from solbench.engine import PlanItem, RunIdentity, Runner, RunOptions
from solbench.errors import SolbenchError
from solbench.worker import CandidateFile

Emit = Callable[[dict[str, Any]], None]


class _Relay:
    """The Runner's progress hooks, forwarded to the session (which turns them into messages)."""

    def __init__(self, session: ExecutorSession):
        self.session = session

    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.session.on_task(problem, workload, candidate)

    def record(self, record: ResultRecord) -> None:
        self.session.on_record(record)


class ExecutorSession:
    """One device, one Runner (one spec, the driver's run id and base seed) for all the items it runs."""

    def __init__(self, start: dict[str, Any]):
        cwd = start.get("cwd")
        if cwd and os.path.isdir(cwd):
            os.chdir(cwd)  # records name candidate paths relative to the driver's folder
        options = RunOptions.model_validate(start["options"])
        self.device_index: int | None = start.get("device_index")
        self.host = socket.gethostname()
        self.emit: Emit = lambda message: None
        # One run id and one secret base seed for every executor: all candidates see the same inputs.
        identity = RunIdentity(run_id=str(start["run_id"]), base_seed=int(start["base_seed"]))
        self.runner = Runner(options, None, _Relay(self), identity=identity)

    def hello(self) -> dict[str, Any]:
        r = self.runner
        return {"kind": "hello", "host": self.host, "device_index": self.device_index, "pid": os.getpid(),
                "spec": r.spec.model_dump(mode="json"), "roof_kind": r.roof_kind, "device_name": r.device_name,
                "environment": r.environment}

    def on_task(self, problem: str, workload: str, candidate: str) -> None:
        self.emit({"kind": "task", "problem": problem, "workload": workload, "candidate": candidate})

    def on_record(self, record: ResultRecord) -> None:
        record.device_index = self.device_index
        record.host = self.host  # its harness.wall_s: the engine's, the record's whole time in this executor
        self.emit({"kind": "record", "record": record.model_dump(mode="json")})

    def run(self, message: dict[str, Any], emit: Emit) -> None:
        """Run one item, sending its messages through ``emit``; ``done`` comes last, whatever happened."""
        self.emit = emit
        try:
            item = self.plan_item(WorkItem.from_message(message))
            self.runner.run_item(item, self._upcoming(message.get("ahead")))
        except Exception as err:  # noqa: BLE001 - the item's status, not the executor's end
            emit({"kind": "error", "reason": f"executor on {self.host}: {type(err).__name__}: {err}"[:2000]})
        finally:
            self.runner.records.clear()  # sent already; a long-lived executor keeps nothing
            emit({"kind": "done"})

    def stream(self, message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Run one item on a thread and yield its messages as they come (a Ray actor's streaming method)."""
        messages: queue.Queue[dict[str, Any]] = queue.Queue()
        thread = threading.Thread(target=self.run, args=(message, messages.put), daemon=True)
        thread.start()
        while True:
            m = messages.get()
            yield m
            if m["kind"] == "done":
                break
        thread.join()

    def _upcoming(self, ahead: dict[str, Any] | None) -> PlanItem | None:
        """The hinted next item, whose workers start during this one; a hint that cannot be read
        starts nothing (it never fails the item that runs)."""
        if not ahead:
            return None
        try:
            return self.plan_item(WorkItem.from_message({**ahead, "ahead": None}))
        except (SolbenchError, OSError, KeyError, TypeError, ValueError):
            return None

    def close(self) -> None:
        """Stop the workers started ahead for an item that never came, and the problem hosts."""
        self.runner.discard_started()
        self.runner.close_hosts()

    def plan_item(self, item: WorkItem) -> PlanItem:
        """The engine's item, from files this executor can read; a candidate that differs from the driver's
        is refused (every node must see the same files)."""
        problem = load_problem(item.problem_path)
        workloads = [problem.workload(name) for name in item.workloads]
        path = Path(item.candidate_path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != item.candidate_sha256:
            raise SolbenchError(f"candidate {path} differs from the driver's copy (sha256 {digest[:12]} here, "
                                f"{item.candidate_sha256[:12]} there): give every node the same files")
        return PlanItem(problem, workloads, [CandidateFile(path, item.candidate, digest)])
