"""Real executors on the CPU: N local processes, and Ray actors when Ray is installed. Each run must give
the statuses and records of the plain run, every record once, and rerun the items of a killed executor."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import solbench
from solbench.api import plan_run
from solbench.data.results import read_records
from solbench.dispatch.driver import run_dispatched
from solbench.dispatch.local import LocalExecutor, cpu_shares, gpu_indices
from solbench.engine.options import RunOptions
from solbench.errors import SolbenchError

TESTS = Path(__file__).resolve().parents[1]
TINY = TESTS / "fixtures" / "tiny" / "scaled_add"
CANDIDATES = [TESTS / "candidates" / "honest.py", TESTS / "candidates" / "wrong_values.py"]
WORKLOADS = ["n4"]  # one each: two items, seconds per item on a small machine
FAST = {"device": "cpu", "budget_s": 0.05, "compile_timeout_s": 120, "workers_ahead": 0}


def _outcome(rows: list[dict]) -> list[tuple]:
    """What must not depend on where a record was made (T_ideal does on the CPU: the built-in roof counts
    the cores an executor may use, a share of them with --jobs)."""
    return sorted((r["problem"], r["workload"], r["solution"], r["status"], r["flops"], r["bytes"], r["gpu_spec"],
                   r["bound"]) for r in rows)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> list[tuple]:
    out = tmp_path_factory.mktemp("plain") / "r.jsonl"
    solbench.run_problems([TINY], CANDIDATES, output=out, workloads=WORKLOADS, **FAST)
    rows, _ = read_records([out])
    assert len(rows) == 2
    return _outcome(rows)


def _check(out: Path, plain: list[tuple]) -> list[dict]:
    rows, warnings = read_records([out])
    assert not warnings and _outcome(rows) == plain  # every record once, the same statuses
    assert len({r["run_id"] for r in rows}) == 1 and all(r["host"] for r in rows)
    return rows


def test_jobs_give_the_plain_runs_records(tmp_path, plain):
    result = solbench.run_problems([TINY], CANDIDATES, output=tmp_path / "r.jsonl", workloads=WORKLOADS, jobs=2,
                                   **FAST)
    rows = _check(tmp_path / "r.jsonl", plain)
    assert {r["environment"]["seed"] for r in rows} == {None}  # the shared base seed stays secret
    assert all(r["harness"]["wall_s"] > 0 for r in rows) and result.run_id == rows[0]["run_id"]


class KillsItself(LocalExecutor):
    """Kills its executor process (SIGKILL) when its first workload starts, once."""

    killed = False

    def run(self, item):
        for message in super().run(item):
            yield message
            if message["kind"] == "task" and not KillsItself.killed:
                KillsItself.killed = True
                os.kill(self.proc.pid, signal.SIGKILL)


def test_a_killed_executors_item_is_rerun(tmp_path, plain):
    options = RunOptions(jobs=1, **FAST)
    plan = plan_run([TINY], CANDIDATES, workloads=WORKLOADS)
    done = run_dispatched(plan, options, tmp_path / "r.jsonl", handles=[KillsItself("cpu0")])
    assert KillsItself.killed and len(done.records) == 2
    _check(tmp_path / "r.jsonl", plain)


def test_placement_checks():
    assert gpu_indices("all", 2) == [0, 1] and gpu_indices("1", 2) == [1]
    assert cpu_shares(2, [0, 1, 2, 3, 4]) == [[0, 1, 2], [3, 4]] and cpu_shares(3, [0, 1]) == [None] * 3
    for bad, match in [("2", "no GPU 2"), ("0,0", "named twice")]:
        with pytest.raises(SolbenchError, match=match):
            gpu_indices(bad, 2)
    with pytest.raises(SolbenchError, match="--jobs -2: N executors on the CPU"):
        RunOptions(device="cpu", jobs=-2)
    for settings, match in [({"gpus": "all"}, "use it with --device cuda"), ({"gpus": "x"}, "give all"),
                            ({"cluster": "spark"}, "use ray"), ({"jobs": 2, "interleave": 2}, "one device")]:
        with pytest.raises(SolbenchError, match=match):
            RunOptions(device="cpu", **settings)


# --- Ray ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_gives_the_plain_runs_records(tmp_path, plain, ray_local):
    solbench.run_problems([TINY], CANDIDATES, output=tmp_path / "r.jsonl", workloads=WORKLOADS, cluster="ray",
                          jobs=2, **FAST)
    _check(tmp_path / "r.jsonl", plain)


def test_a_killed_actors_item_is_rerun(tmp_path, plain, ray_local):
    from solbench.dispatch.ray_cluster import RayExecutor

    class KillsActor(RayExecutor):
        killed = False

        def run(self, item):
            for message in super().run(item):
                yield message
                if message["kind"] == "task" and not KillsActor.killed:
                    KillsActor.killed = True
                    ray_local.kill(self.actor, no_restart=True)

    options = RunOptions(jobs=1, cluster="ray", **FAST)
    plan = plan_run([TINY], CANDIDATES, workloads=WORKLOADS)
    done = run_dispatched(plan, options, tmp_path / "r.jsonl", handles=[KillsActor("ray-cpu0", {"num_cpus": 1})])
    assert KillsActor.killed and len(done.records) == 2
    _check(tmp_path / "r.jsonl", plain)


@pytest.mark.parametrize("ahead", [0, 1])
def test_an_executor_starts_its_next_items_worker_during_the_current_one(tmp_path, ahead):
    """One executor, two items: with workers ahead, the second item's worker was spawned while the first
    ran (the run waited only for what was left of its start); without, it waited for all of it."""
    out = tmp_path / "r.jsonl"
    solbench.run_problems([TINY], CANDIDATES, output=out, workloads=WORKLOADS, jobs=1,
                          **(FAST | {"workers_ahead": ahead}))
    rows, _ = read_records([out])
    second = rows[-1]["harness"]  # the file's order is the run's (one executor, one writer)
    if ahead:
        assert second["worker_wait_s"] < second["worker_start_s"]
    else:
        assert second["worker_wait_s"] > 0.5 * second["worker_start_s"]
