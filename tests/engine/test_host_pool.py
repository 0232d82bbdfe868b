"""A run's problem hosts: a pool bounded by its lanes and cores; a lane's worker starts while its cases are made."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import solbench
from solbench.data.problem import load_problem
from solbench.engine.pipeline import default_hosts
from solbench.engine.problem_host import HostPool
from solbench.engine.runner import PlanItem, Runner
from solbench.worker.candidate import describe_candidates

HERE = Path(__file__).resolve().parents[1]
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"


class FakeHost:
    """Stands in for a ProblemHost: counts what the pool does with it."""

    def __init__(self):
        self.folders: set[str] = set()
        self.starts = 1
        self.closed = 0

    def expect(self, folders):
        self.folders.update(folders)
        return self

    def close(self):
        self.closed += 1


def test_the_pool_lends_each_host_to_one_lane_at_a_time_and_starts_no_more_than_its_size():
    made: list[FakeHost] = []
    pool = HostPool(lambda: made.append(FakeHost()) or made[-1], size=2)
    lent: set[int] = set()
    most = [0]
    guard = threading.Lock()
    errors: list[str] = []

    def lane(n: int) -> None:
        for _ in range(3):
            with pool.lend({f"/p{n}"}) as host:
                with guard:
                    if id(host) in lent:
                        errors.append("a host lent to two lanes at once")
                    lent.add(id(host))
                    most[0] = max(most[0], len(lent))
                time.sleep(0.01)
                with guard:
                    lent.discard(id(host))

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(made) == 2 and most[0] == 2  # six lanes, two hosts, both busy at once
    assert pool.starts == 2
    # Each host may read every folder a lane asked for while it held it (as one host per lane could).
    assert set().union(*(h.folders for h in made)) == {f"/p{n}" for n in range(6)}
    pool.close()
    assert [h.closed for h in made] == [1, 1] and pool.starts == 2  # the processes it started, stopped too


def test_a_host_lent_when_the_pool_is_closed_is_stopped_when_given_back():
    host = FakeHost()
    pool = HostPool(lambda: host, size=1)
    with pool.lend(set()) as lent:
        pool.close()
        assert lent.closed == 1
    assert host.closed == 2  # stopped again on its return: never lent out after the close
    with pool.lend(set()) as again:  # a later request gets a host again
        assert again is host


@pytest.mark.parametrize(("in_flight", "cores", "hosts"), [(1, 2, 1), (2, 2, 1), (4, 8, 2), (12, 16, 4), (8, 64, 4)])
def test_hosts_are_one_per_two_lanes_and_at_most_a_quarter_of_the_cores(in_flight, cores, hosts):
    assert default_hosts(in_flight, cores) == hosts


@pytest.mark.parametrize(("in_flight", "cores", "hosts"), [(1, 2, 1), (12, 16, 6), (12, 8, 4), (8, 64, 4)])
def test_on_cuda_hosts_are_one_per_two_lanes_and_at_most_half_the_cores(in_flight, cores, hosts):
    assert default_hosts(in_flight, cores, "cuda") == hosts


@pytest.mark.slow
def test_a_lanes_worker_imports_while_its_first_cases_are_made(tmp_path):
    """No worker started ahead (workers_ahead=0): the lane's own worker is already spawned when the
    parent asks the problem host for the first workload's cases, and the run used one host."""
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=5, compile_timeout_s=60, workers_ahead=0)
    runner = Runner(options, tmp_path / "r.jsonl")
    seen: list[list[tuple[str, bool]]] = []
    make = runner._make_cases

    def spy(problem, workload, ledger):
        with runner._lock:
            seen.append([(s.state, s.client is not None and s.client.proc.poll() is None)
                         for s in runner._active.values()])
        return make(problem, workload, ledger)

    runner._make_cases = spy
    problem = load_problem(TINY / "scaled_add")
    (record,) = runner.run([PlanItem(problem, problem.workloads[:1],
                                     describe_candidates([CANDIDATES / "honest.py"]))])
    assert record.status == "PASSED", record.reason
    assert seen == [[("spawned", True)]]
    assert runner.hosts.starts == 1
    # The run did not wait for the whole start: part of it went on beside the cases.
    assert record.harness["worker_wait_s"] < record.harness["worker_start_s"]
