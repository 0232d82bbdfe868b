"""The driver with scripted executors (no processes): longest first, one write per key, a lost item rerun
once, then a RUNTIME_ERROR record that says why; an item that cannot run is a status, not a lost run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from solbench.api import plan_run
from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.data.results import read_records
from solbench.data.roofline import workload_point
from solbench.dispatch.driver import LOST_FLAG, Driver, start_message
from solbench.dispatch.items import WorkItem, split_plan
from solbench.dispatch.local import ExecutorLost, ExecutorStartError
from solbench.engine.options import RunOptions
from solbench.engine.scoring import Evaluation, build_record, cpu_estimate_spec
from solbench.errors import SolbenchError
from solbench.worker.candidate import describe_candidates

TESTS = Path(__file__).resolve().parents[1]
TINY = TESTS / "fixtures" / "tiny" / "scaled_add"
CANDIDATES = [TESTS / "candidates" / "honest.py", TESTS / "candidates" / "wrong_values.py"]


def _record(item: WorkItem, workload: str, run_id: str) -> dict[str, Any]:
    """What an executor would send: a PASSED record with a time of 1 ms."""
    problem, spec = load_problem(item.problem_path), cpu_estimate_spec()
    w = problem.workload(workload)
    axes = problem.resolve_axes(w)
    record = build_record(problem=problem, workload=w, axes=axes, candidate=describe_candidates([item.candidate_path])[0],
                          evaluation=Evaluation(Status.PASSED, timing={"median_s": 1e-3}),
                          roof=workload_point(problem, w, spec, axes), spec=spec, roof_kind="estimate", device="cpu",
                          device_name="test cpu", environment={}, telemetry={}, log="", run_id=run_id)
    return record.model_dump(mode="json")


class Scripted:
    """An executor that sends a record per workload; reaching workload ``die_on`` (``deaths`` times at
    most), it is lost."""

    def __init__(self, label: str, die_on: str | None = None, deaths: int = 1, repeat: bool = False,
                 error: str | None = None, starts: int = 99):
        self.label, self.die_on, self.deaths, self.repeat = label, die_on, deaths, repeat
        self.error, self.starts, self.run_id, self.items = error, starts, "", []

    def start(self, start: dict[str, Any]) -> dict[str, Any]:
        if self.starts == 0:
            raise ExecutorStartError("no GPU left")
        self.starts -= 1
        self.run_id = start["run_id"]
        return {"kind": "hello", "host": "h", "device_index": 0, "spec": cpu_estimate_spec().model_dump(mode="json"),
                "roof_kind": "estimate", "device_name": "test cpu", "environment": {}}

    def run(self, item: WorkItem) -> Iterator[dict[str, Any]]:
        self.items.append(item)
        if self.error:
            yield {"kind": "error", "reason": self.error}
        for w in [] if self.error else item.workloads:
            if w == self.die_on and self.deaths > 0:
                self.deaths -= 1
                raise ExecutorLost(f"executor {self.label} was killed by SIGKILL (signal 9)")
            yield {"kind": "task", "problem": item.problem, "workload": w, "candidate": item.candidate}
            for _ in range(2 if self.repeat else 1):
                yield {"kind": "record", "record": _record(item, w, self.run_id)}
        yield {"kind": "done"}

    def close(self) -> None:
        pass


def _items() -> list[WorkItem]:
    return split_plan(plan_run([TINY], CANDIDATES, workloads=["n4", "n32"]))


def _drive(tmp_path: Path, handles: list[Any]) -> tuple[Driver, list[dict[str, Any]]]:
    options = RunOptions(device="cpu", jobs=len(handles))
    driver = Driver(options, tmp_path / "r.jsonl", _NoProgress(), start_message(options))
    driver.run(_items(), handles)
    rows, warnings = read_records([tmp_path / "r.jsonl"]) if (tmp_path / "r.jsonl").exists() else ([], [])
    assert not warnings
    return driver, rows


class _NoProgress:
    def begin(self, total: int) -> None:
        pass

    def task(self, *a: str) -> None:
        pass

    def record(self, record: Any) -> None:
        pass


def _keys(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((r["solution"], r["workload"]) for r in rows)


ALL = sorted((c, w) for c in ("honest", "wrong_values") for w in ("n4", "n32"))


def test_items_one_per_candidate_longest_first():
    problem = load_problem(TINY)
    plan = plan_run([TINY], CANDIDATES, workloads=["n4"]) + plan_run([TINY], CANDIDATES[:1], workloads=["n131072"])
    items = split_plan(plan)
    big = problem.auto_bytes(problem.resolve_axes(problem.workload("n131072")))
    assert [(i.candidate, i.workloads) for i in items] == [("honest", ("n131072",)), ("honest", ("n4",)),
                                                           ("wrong_values", ("n4",))]
    assert items[0].estimate_bytes > items[1].estimate_bytes == items[2].estimate_bytes
    assert items[0].estimate_bytes - items[1].estimate_bytes == big - 4 * 64 * 4 * 3
    assert [i.index for i in items] == [0, 1, 2]
    assert WorkItem.from_message(items[0].as_message()) == items[0]


def test_every_record_written_once_in_one_file(tmp_path):
    driver, rows = _drive(tmp_path, [Scripted("a", repeat=True), Scripted("b", repeat=True)])
    assert _keys(rows) == ALL and len(driver.records) == 4 and driver.duplicates == 4
    assert {r["run_id"] for r in rows} == {driver.run_id}


def test_a_lost_item_is_rerun_once_on_its_missing_workloads(tmp_path):
    dying = Scripted("a", die_on="n32")  # its first item loses its second workload
    driver, rows = _drive(tmp_path, [dying])
    assert _keys(rows) == ALL and all(r["status"] == "PASSED" for r in rows)
    rerun = [i for i in dying.items if len(i.workloads) == 1]
    assert len(rerun) == 1 and rerun[0].workloads == ("n32",)


def test_lost_twice_is_a_runtime_error_that_says_so(tmp_path):
    driver, rows = _drive(tmp_path, [Scripted("a", die_on="n32", deaths=99)])
    by_key = {(r["solution"], r["workload"]): r for r in rows}
    assert sorted(by_key) == ALL
    failed = [r for r in rows if r["status"] != "PASSED"]
    # Each item: n4, then lost at n32; the rerun of n32 alone is lost again.
    assert {(r["solution"], r["workload"]) for r in failed} == {("honest", "n32"), ("wrong_values", "n32")}
    for r in failed:
        assert r["status"] == "RUNTIME_ERROR" and r["time_s"] is None and LOST_FLAG in r["flags"]
        assert "SIGKILL" in r["reason"] and "lost again after one rerun" in r["reason"]
        assert r["flops"] == 2 * 32 * 64 and r["device_index"] == 0 and r["host"] == "h"


def test_an_item_that_cannot_run_is_a_status_and_not_rerun(tmp_path):
    refusing = Scripted("a", error="candidate differs from the driver's copy")
    driver, rows = _drive(tmp_path, [refusing])
    assert _keys(rows) == ALL and {r["status"] for r in rows} == {"RUNTIME_ERROR"}
    assert all("differs" in r["reason"] for r in rows) and len(refusing.items) == 2


def test_an_executor_that_cannot_restart_leaves_the_others(tmp_path):
    driver, rows = _drive(tmp_path, [Scripted("a", die_on="n4", starts=1), Scripted("b")])
    assert _keys(rows) == ALL and all(r["status"] == "PASSED" for r in rows)


def test_no_executor_at_all_is_one_clear_error(tmp_path):
    with pytest.raises(SolbenchError, match="no executor started .*no GPU left"):
        _drive(tmp_path, [Scripted("a", starts=0)])


def test_each_item_carries_the_next_one_as_a_hint(tmp_path):
    """One executor: each item names the one that follows it, the last names none."""
    handle = Scripted("cpu0")
    _drive(tmp_path, [handle])
    order = [i.index for i in handle.items]
    hints = [(i.ahead or {}).get("index") for i in handle.items]
    assert order == sorted(order) and hints == order[1:] + [None]
