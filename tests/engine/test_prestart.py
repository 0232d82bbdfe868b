"""Workers started ahead: the next problem's workers import torch while the current problem runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import solbench
from solbench.data.problem import load_problem
from solbench.engine.runner import PlanItem, Runner
from solbench.worker.candidate import describe_candidates

HERE = Path(__file__).resolve().parents[1]
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"


def _plan() -> list[PlanItem]:
    first, second = load_problem(TINY / "scaled_add"), load_problem(TINY / "row_write")
    return [PlanItem(first, first.workloads[:1], describe_candidates([CANDIDATES / "honest.py"])),
            PlanItem(second, second.workloads[:1], describe_candidates([CANDIDATES / "row_write_inplace.py"]))]


@pytest.mark.parametrize("ahead", [0, 1])
def test_next_problems_worker_is_started_while_the_current_problem_runs(tmp_path, ahead):
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=ahead)
    runner = Runner(options, tmp_path / "r.jsonl")
    records = runner.run(_plan())
    assert [(r.problem, r.status) for r in records] == [("tiny.scaled_add", "PASSED"), ("tiny.row_write", "PASSED")]
    second = records[1].harness
    assert second["transport"] == "memfd"  # the CPU's route
    if ahead:
        # Spawned during the first problem: the run waited only for what was left of its start.
        assert second["worker_wait_s"] < second["worker_start_s"]
    else:
        # Spawned when its lane began: the run waited for most of it (the lane's cases, the only work
        # beside it, take a fraction of a worker's start).
        assert second["worker_wait_s"] > 0.5 * second["worker_start_s"]
    assert runner._prestarted == {}


def test_workers_started_for_a_problem_that_never_runs_are_stopped(tmp_path):
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=1)
    runner = Runner(options, tmp_path / "r.jsonl")
    first, second = _plan()
    runner.start_ahead(second)
    (slot,) = runner._prestarted.values()
    proc = slot.client.proc
    assert proc is not None and proc.poll() is None
    runner.discard_started()
    assert runner._prestarted == {} and proc.poll() is not None
