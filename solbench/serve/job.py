"""A scoring job: the process the server starts for a batch of claimed submissions.

``python -m solbench.serve.job JOB.json`` runs each submission through the public API
(:func:`solbench.api.plan_run` / :func:`solbench.api.run_plan`), as ``solbench run`` would, and tells
the server what happens as JSON lines appended to the job's events file (``begin``, ``task``,
``record``, ``done``, ``failed``). Candidates run in the engine's sandboxed workers below this
process; a problem folder a user uploaded has its reference run here. Neither is ever imported by
the server. The job dies with the server (``PR_SET_PDEATHSIG``): a killed server leaves no job
scoring on behind its back, and its submissions are run again by the next one.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from solbench import api
from solbench.data import ResultRecord, append_record_checked
from solbench.engine import Runner, dispatched
from solbench.errors import SolbenchError

PR_SET_PDEATHSIG = 1
PARENT_ENV = "SOLBENCH_SERVE_PARENT"


def die_with_parent() -> None:
    """SIGTERM when the server dies (the engine then stops its workers); exit now if it already has."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if str(os.getppid()) != os.environ.get(PARENT_ENV, str(os.getppid())):
        sys.exit(0)


class Events:
    """Progress of one submission as JSON lines (one write per line: a reader never sees half a one)."""

    def __init__(self, path: Path, submission: int):
        self.path, self.submission = path, submission

    def emit(self, event: str, **data: Any) -> None:
        line = json.dumps({"submission": self.submission, "event": event, **data}) + "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)

    def begin(self, total: int) -> None:
        self.emit("begin", total=total)

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.emit("task", problem=problem, workload=workload, candidate=candidate)

    def record(self, record: ResultRecord) -> None:
        self.emit("record", record=record.model_dump(mode="json"))


def _named(plan: list[Any], name: str) -> list[Any]:
    """The candidate under its file's own name: the engine names a file that shares a name with one of
    the problem's shipped candidates by its folder (here a job folder); a submission is never taken
    for a shipped file by its name alone (the leaderboard names it by its submission)."""
    for item in plan:
        item.candidates = [replace(c, name=name) for c in item.candidates]
    return plan


def _remaining(plan: list[Any], done: set[tuple[str, str]]) -> list[Any]:
    """The plan without the workloads that already have a record (a submission run again)."""
    for item in plan:
        item.workloads = [w for w in item.workloads if (item.problem.name, w.name) not in done]
    return [item for item in plan if item.workloads]


def _reason(err: Exception) -> str:
    """An error as a submission's one-line reason."""
    return " ".join(str(err).split())[:500]


def _plan(item: dict[str, Any], events: Events, problems_dir: str | None) -> list[Any] | None:
    """A submission's plan (without the workloads it already has records of); None when it cannot be
    planned (a problem that does not load, ...): it fails alone."""
    try:
        plan = api.plan_run(item["problems"], [item["solution"]], workloads=item["workloads"], small=item["small"],
                            problems_dir=Path(problems_dir) if problems_dir else None, log=lambda line: None)
    except SolbenchError as err:
        events.emit("failed", reason=_reason(err))
        return None
    return _remaining(_named(plan, Path(item["solution"]).stem), {tuple(pair) for pair in item["done"]})


class _Router:
    """The batch's progress and record hook: each record to its submission's events and results file, by
    the candidate file it was made from (submissions may share a file name, never a path)."""

    def __init__(self) -> None:
        self.owners: dict[str, tuple[Events, Path]] = {}  # candidate path -> its submission's events and file
        self.pairs: list[tuple[Events, set[tuple[str, str]]]] = []  # each submission's (problem, workload)s
        self._made: dict[int, str] = {}  # id(record) -> its candidate's path, from the hook until written

    def add(self, plan: list[Any], events: Events, output: Path) -> None:
        self.pairs.append((events, {(p.problem.name, w.name) for p in plan for w in p.workloads}))
        for item in plan:
            for c in item.candidates:
                self.owners[str(c.path)] = (events, output)

    def hook(self, record: ResultRecord, context: Any) -> None:
        self._made[id(record)] = str(context.candidate.path)

    def begin(self, total: int) -> None:
        pass  # each submission's own total was sent when it was planned

    def task(self, problem: str, workload: str, candidate: str) -> None:
        for events, pairs in self.pairs:
            if (problem, workload) in pairs:
                events.task(problem, workload, candidate)

    def record(self, record: ResultRecord) -> None:
        owner = self.owners.get(self._made.pop(id(record), ""))
        if owner is None:
            return
        events, output = owner
        refused = append_record_checked(output, record)
        if refused:
            print(refused, file=sys.stderr)
            return
        events.record(record)


def run_batch(items: list[dict[str, Any]], options: api.RunOptions, events_path: Path, problems_dir: str | None) -> None:
    """Score a batch of submissions as one run: their workers start ahead of each other and the shared
    workloads' inputs and references are made once (H200, 2026-12-02: one run per submission, each with
    its own worker and problem-host starts, scored 4 of 20 in 90 s). A submission that cannot be planned
    fails alone; one the run cannot finish fails with the run's reason."""
    router, plan, open_events = _Router(), [], []
    for item in items:
        events = Events(events_path, item["submission"])
        mine = _plan(item, events, problems_dir)
        if mine is None:
            continue
        events.begin(sum(len(p.workloads) * len(p.candidates) for p in mine))
        router.add(mine, events, Path(item["output"]))
        plan += mine
        open_events.append(events)
    try:
        if plan:
            Runner(options, None, router, hooks=[router.hook]).run(plan)
    except SolbenchError as err:
        for events in open_events:
            events.emit("failed", reason=_reason(err))
        return
    for events in open_events:
        events.emit("done")


def run_item(item: dict[str, Any], options: api.RunOptions, events: Events, problems_dir: str | None) -> None:
    """Score one submission on its own (interleaved or dispatched runs: the API's own path)."""
    plan = _plan(item, events, problems_dir)
    if plan is None:
        return
    try:
        if plan:
            api.run_plan(plan, options, Path(item["output"]), events)
    except SolbenchError as err:
        events.emit("failed", reason=_reason(err))
        return
    events.emit("done")


def main(argv: list[str]) -> int:
    die_with_parent()
    job = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    events_path = Path(job["events"])
    try:
        options = api.resolve_options(**job["settings"])
    except SolbenchError as err:
        for item in job["items"]:
            Events(events_path, item["submission"]).emit("failed", reason=str(err))
        return 0
    if options.interleave or dispatched(options):
        for item in job["items"]:
            run_item(item, options, Events(events_path, item["submission"]), job.get("problems_dir"))
    else:
        run_batch(job["items"], options, events_path, job.get("problems_dir"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
