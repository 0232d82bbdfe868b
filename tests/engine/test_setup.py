"""A candidate's setup(...): once per workload, untimed, in the worker, on a case of its own."""

from __future__ import annotations

from pathlib import Path

import solbench
from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.engine.cases import prepare_cases
from solbench.engine.evaluation import setup_inputs
from solbench.engine.problem_code import load_reference

HERE = Path(__file__).resolve().parents[1]
TINY = HERE / "fixtures" / "tiny" / "scaled_add"
CANDIDATES = HERE / "candidates"


def _run(tmp_path: Path, candidate: str, workloads: list[str]) -> list:
    result = solbench.run_problems([TINY], [CANDIDATES / candidate], device="cpu", rounds=3, budget_s=0.05,
                                   workers_ahead=0, output=tmp_path / "r.jsonl", workloads=workloads)
    return result.records


def test_setup_runs_once_per_workload_before_the_rounds(tmp_path):
    records = _run(tmp_path, "setup_honest.py", ["n4", "n32"])
    assert [r.status for r in records] == [Status.PASSED.value] * 2, [r.reason for r in records]
    for r in records:  # timed apart from the rounds: its own entry in the harness section
        assert r.harness["setup_s"] > 0


def test_setup_that_caches_an_answer_is_incorrect(tmp_path):
    (record,) = _run(tmp_path, "setup_caches_outputs.py", ["n32"])
    assert record.status == Status.INCORRECT.value
    assert "round 1" in record.reason


def test_setup_failure_names_the_setup_phase(tmp_path):
    (record,) = _run(tmp_path, "setup_raises.py", ["n4"])
    assert record.status == Status.RUNTIME_ERROR.value
    assert "no workspace for this shape" in record.reason and "setup" in record.reason


def test_setup_case_is_none_of_the_rounds_or_sets():
    problem = load_problem(TINY)
    cases = prepare_cases(problem, problem.workload("n32"), base_seed=11, device="cpu", rounds=3,
                          ref_fn=load_reference(problem), gen_fn=None)
    x = setup_inputs(cases)[0]
    assert tuple(x.shape) == (32, 64)
    assert not any(c.inputs["x"].equal(x) for c in [*cases.rounds, *cases.sets])
    assert setup_inputs(cases)[0].equal(x)  # derived from the run's seed: the same for every candidate
