"""The parent side: seeds and cases, set counts, scoring and the physics floor, the run loop, appends."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest
import torch

import solbench
from solbench.data.hardware import load_spec
from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.data.results import append_records, read_records
from solbench.data.roofline import workload_point
from solbench.engine.cases import derive_seed, prepare_cases, timing_set_count
from solbench.engine.problem_code import load_reference
from solbench.engine.scoring import (
    Evaluation,
    build_record,
    cpu_estimate_spec,
    resolve_spec,
)
from solbench.worker.candidate import describe_candidates

HERE = Path(__file__).resolve().parents[1]  # tests/
TINY = HERE / "fixtures" / "tiny"
CANDIDATES = HERE / "candidates"


def test_derive_seed_is_deterministic_and_distinct():
    a = derive_seed(7, "p", "w", "round", 0)
    assert a == derive_seed(7, "p", "w", "round", 0)
    others = {derive_seed(7, "p", "w", "round", 1), derive_seed(7, "p", "w", "set", 0), derive_seed(8, "p", "w", "round", 0)}
    assert a not in others and len(others) == 3
    assert 0 <= a < 2**63


def test_cases_fresh_per_round_and_reference_on_pristine_copies():
    problem = load_problem(TINY / "row_write")
    w = problem.workloads[0]
    cases = prepare_cases(problem, w, base_seed=1, device="cpu", rounds=3, ref_fn=load_reference(problem), gen_fn=None)
    assert len(cases.rounds) == 3 and len(cases.sets) >= 2
    caches = [c.inputs["cache"] for c in cases.rounds + cases.sets]
    for i in range(len(caches)):
        for j in range(i + 1, len(caches)):
            assert not torch.equal(caches[i], caches[j]), "every round and set has its own inputs"
    for c in cases.rounds:
        # The in-place reference wrote into its own copy: the kept inputs are as generated.
        assert not torch.equal(c.inputs["cache"][0], c.inputs["x"])
        expected = c.inputs["cache"].clone()
        expected[0] = c.inputs["x"]
        assert torch.equal(c.expected["cache_out"], expected)
    again = prepare_cases(problem, w, base_seed=1, device="cpu", rounds=3, ref_fn=load_reference(problem), gen_fn=None)
    assert torch.equal(again.rounds[2].inputs["cache"], cases.rounds[2].inputs["cache"])


@pytest.mark.parametrize("set_bytes, device, l2, memory, expected", [
    (32 << 20, "cuda", 60 << 20, 100 << 30, 4),  # 2 * 60 MiB / 32 MiB + 1: total exceeds 2x L2
    (512 << 20, "cuda", 60 << 20, 100 << 30, 2),  # big sets: the minimum of two
    (4096, "cuda", 60 << 20, 100 << 30, 256),  # tiny sets: capped (the L2 flush does the rest)
    (1 << 20, "cuda", 60 << 20, 100 << 30, 121),  # 1 MiB of inputs: enough sets for a cold L2 in graph mode
    (1 << 30, "cuda", 60 << 20, 4 << 30, 2),  # memory-bound cap never goes below two
    (8 << 20, "cuda", 60 << 20, 300 << 20, 3),  # a quarter of 300 MiB holds 3 sets of 3 x 8 MiB
    (4096, "cpu", None, 8 << 30, 4),
    (1 << 30, "cpu", None, 8 << 30, 2),
])
def test_timing_set_count(set_bytes, device, l2, memory, expected):
    n = timing_set_count(set_bytes, device, l2, memory)
    assert n == expected
    memory_capped = memory // 4 // (3 * set_bytes) <= n
    if device == "cuda" and n < 256 and not memory_capped:
        assert n * set_bytes > 2 * l2


@pytest.mark.parametrize("set_bytes, memory, expected", [
    (4096, 100 << 30, 4),  # tiny sets: a few, each call's L2 is flushed anyway
    (1 << 20, 100 << 30, 4),
    (32 << 20, 100 << 30, 4),
    (512 << 20, 100 << 30, 2),  # big ones: still two at least
    (8 << 20, 300 << 20, 3),  # memory caps as before
])
def test_timing_set_count_where_every_call_follows_a_flush(set_bytes, memory, expected):
    assert timing_set_count(set_bytes, "cuda", 60 << 20, memory, flushed=True) == expected


def test_the_calls_are_cold_by_flush_under_events_and_the_all_stream_timer_only():
    from solbench.timing.config import TimingConfig

    assert TimingConfig(device="cuda").cold_by_flush  # auto with the all-stream timer: events
    assert TimingConfig(device="cuda", method="events", cupti=False).cold_by_flush
    assert not TimingConfig(device="cuda", method="auto", cupti=False).cold_by_flush  # may batch in a graph
    assert not TimingConfig(device="cuda", method="graph").cold_by_flush
    assert not TimingConfig(device="cpu").cold_by_flush


def test_cpu_estimate_is_an_upper_bound_on_one_core():
    spec = cpu_estimate_spec()
    assert spec.id == "cpu_estimate" and spec.device_type == "cpu"
    # Above what any core sustains: >= 64 fp32 FLOP/cycle and >= 128 B/cycle at 5 GHz, per core.
    assert spec.peak("float32") >= 64 * 5e9 and spec.memory_bandwidth >= 128 * 5e9
    assert resolve_spec("cpu", None)[1] == "estimate"
    assert resolve_spec("cpu", "h200_sxm")[0].id == "h200_sxm"


def _record(status: Status, median: float | None):
    problem = load_problem(TINY / "scaled_add")
    w = problem.workload("n32")
    spec = load_spec("h200_sxm")
    roof = workload_point(problem, w, spec)
    ev = Evaluation(status, None if status == Status.PASSED else "why", timing={"median_s": median} if median else {})
    (cand,) = describe_candidates([CANDIDATES / "honest.py"])
    return roof, build_record(problem=problem, workload=w, axes=problem.resolve_axes(w), candidate=cand,
                              evaluation=ev, roof=roof, spec=spec, roof_kind="datasheet", device="cuda",
                              device_name="NVIDIA H200", environment={"hostname": "h"}, telemetry={"available": False},
                              log="", run_id="r")


def test_build_record_scores_only_passed():
    roof, rec = _record(Status.PASSED, 2e-6)
    flops, nbytes = 2 * 32 * 64, 3 * 32 * 64 * 4
    assert (rec.flops, rec.bytes) == (flops, nbytes)
    t_ideal = max(flops / 67e12, nbytes / 4.8e12)
    assert rec.t_ideal_s == pytest.approx(t_ideal) and rec.bound == "memory"
    assert rec.time_s == 2e-6 and rec.sol == pytest.approx(t_ideal / 2e-6)
    assert rec.achieved_bytes_per_s == pytest.approx(nbytes / 2e-6)
    _, bad = _record(Status.INCORRECT, 2e-6)
    assert bad.time_s is None and bad.sol is None and bad.achieved_flops_per_s is None and bad.reason == "why"


def test_run_problems_in_process(tmp_path):
    out = tmp_path / "r.jsonl"
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=123, compile_timeout_s=60, workers_ahead=1)
    result = solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "honest.py", CANDIDATES / "wrong_values.py"],
                                   options, output=out, workloads=["n4"])
    assert [(r.solution, r.status) for r in result.records] == [("honest", "PASSED"), ("wrong_values", "INCORRECT")]
    assert not result.all_passed
    rows, warnings = read_records([out])
    assert not warnings and [r["solution"] for r in rows] == ["honest", "wrong_values"]
    honest = rows[0]
    assert honest["environment"]["seed"] == 123 and honest["roof"] == "estimate" and "cpu_estimate" in honest["flags"]
    assert honest["timing"]["n"] >= 10 and honest["correctness"]["timed"]["passed"]
    assert len(honest["correctness"]["rounds"]) == 3
    # the worker's side of its timing request, broken down: reading it, the timer, the rest; all inside the
    # window the parent clocked around the request
    details, window = honest["timing"]["details"], honest["harness"]["window"]
    inside = sum(details[k] for k in ("worker_receive_s", "worker_timer_s", "worker_probe_s", "worker_findings_s",
                                      "worker_rest_s"))
    assert details["worker_findings_s"] > 0
    assert details["worker_timer_s"] >= details["warmup_s"] + details["sampling_s"] > 0
    assert 0 <= details["worker_receive_s"] and inside <= window["request_s"] - window["send_s"] - window["read_s"]
    # on a CPU the telemetry is the machine's load sampled from /proc during the timing (no NVML)
    assert honest["telemetry"]["available"] is True and honest["telemetry"]["kind"] == "cpu"


def test_unknown_workload_and_bad_rounds_are_user_errors(tmp_path):
    with pytest.raises(solbench.ProblemError, match="no workload named 'nope'"):
        solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "honest.py"], device="cpu", workloads=["nope"],
                              output=tmp_path / "x.jsonl")
    with pytest.raises(solbench.SolbenchError, match="at least 3"):
        solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "honest.py"], device="cpu", rounds=1,
                              output=tmp_path / "x.jsonl")


def _append_many(path: str, writer: int, n: int) -> None:
    for i in range(n):
        append_records(path, [{"problem": "p", "workload": "w", "status": "PASSED", "writer": writer, "i": i,
                               "pad": "x" * (997 * (i % 7))}])


def test_concurrent_appends_from_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "c.jsonl")
    ctx = mp.get_context("fork")  # the writers need nothing but solbench.data.results
    procs = [ctx.Process(target=_append_many, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = Path(path).read_text().splitlines()
    seen = {(json.loads(line)["writer"], json.loads(line)["i"]) for line in lines}
    assert len(lines) == 160 and seen == {(w, i) for w in range(4) for i in range(40)}


def test_guards_cannot_be_blinded_from_the_candidate(tmp_path):
    """Replacing the worker's hook changes nothing (bound before the import); blinding the worker's
    guards entirely still leaves the parent's own view of the worker's processes."""
    result = solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "replaces_findings_hook.py",
                                                           CANDIDATES / "blinds_guards_spawns.py"],
                                   device="cpu", output=tmp_path / "r.jsonl", budget_s=0.05, workloads=["n4"],
                                   compile_timeout_s=60, workers_ahead=0)
    by_name = {r.solution: r for r in result.records}
    hook, blind = by_name["replaces_findings_hook"], by_name["blinds_guards_spawns"]
    assert hook.status == "REWARD_HACK" and "guard:thread" in hook.flags
    assert blind.status == "REWARD_HACK" and "left process" in blind.reason and "guard:process" in blind.flags


def test_guards_off_flags_every_record_and_reviews_nothing(tmp_path):
    """The engine-only comparison: the cheat that the guards call a reward hack (above) passes, and
    every record of the run says the guards were off."""
    result = solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "honest.py",
                                                           CANDIDATES / "replaces_findings_hook.py"],
                                   output=tmp_path / "r.jsonl", workloads=["n4"], device="cpu", budget_s=0.05,
                                   compile_timeout_s=60, workers_ahead=0, guards=False)
    assert [(r.solution, r.status) for r in result.records] == [("honest", "PASSED"),
                                                                ("replaces_findings_hook", "PASSED")]
    for r in result.records:
        assert "guards-off" in r.flags and not [f for f in r.flags if f.startswith("guard:")]
        assert "findings" not in r.correctness
    rows, _ = read_records([tmp_path / "r.jsonl"])
    assert all("guards-off" in r["flags"] for r in rows)


def test_a_declared_in_place_write_leaves_no_finding_in_the_record(tmp_path):
    """The output the problem declares inplace_of its input shares that input's memory by contract:
    the record neither fails it nor lists it among its findings (the H200 record of
    llama3_1_8b.decoder_layer listed its k/v cache writes as INCORRECT findings)."""
    result = solbench.run_problems([TINY / "row_write"], [CANDIDATES / "row_write_inplace.py"], device="cpu",
                                   output=tmp_path / "r.jsonl", budget_s=0.05, compile_timeout_s=60,
                                   workers_ahead=0)
    (record,) = result.records
    assert record.status == "PASSED" and not [f for f in record.flags if f.startswith("guard:")]
    assert "findings" not in record.correctness
    rows, _ = read_records([tmp_path / "r.jsonl"])
    assert "findings" not in rows[0]["correctness"]


def test_parent_is_undumpable_after_a_run_starts(tmp_path):
    import ctypes

    from solbench.engine.options import RunOptions
    from solbench.engine.runner import Runner

    Runner(RunOptions(device="cpu"), tmp_path / "r.jsonl")
    pr_get_dumpable = 3
    assert ctypes.CDLL(None, use_errno=True).prctl(pr_get_dumpable, 0, 0, 0, 0) == 0


@pytest.mark.slow
def test_a_records_log_names_the_harness_files_relative_to_its_root(tmp_path):
    """A failing candidate's traceback reaches the record's log with the harness's own files written
    relative to the folder holding solbench: a committed record names no machine's folders."""
    from solbench.engine.runner import PlanItem, Runner

    root = str(Path(solbench.__file__).resolve().parents[1]) + "/"
    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    problem = load_problem(TINY / "scaled_add")
    (record,) = Runner(options, tmp_path / "r.jsonl").run_item(
        PlanItem(problem, problem.workloads[:1], describe_candidates([CANDIDATES / "raises.py"])))
    assert record.status == Status.RUNTIME_ERROR
    assert "candidate exploded on purpose" in record.log and "solbench/worker/main.py" in record.log
    assert root not in record.log


def test_a_records_reason_and_memory_retries_name_the_harness_files_relative_to_its_root(tmp_path):
    """A problem error names the problem file by its absolute path: the written record (its reason and
    its memory retries' lines) has the harness's root taken out, and nothing else of the line."""
    from solbench.engine.ledger import Ledger
    from solbench.engine.options import RunOptions
    from solbench.engine.runner import Runner

    root = str(Path(solbench.__file__).resolve().parents[1]) + "/"
    path = f"{root}problems/x/problem.yaml"
    _, rec = _record(Status.RUNTIME_ERROR, None)
    rec.reason = f"{path}: reference raised OutOfMemoryError"
    runner = Runner(RunOptions(device="cpu"), tmp_path / "r.jsonl")
    runner._emit(rec, Ledger())
    (row,) = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert row["reason"] == "problems/x/problem.yaml: reference raised OutOfMemoryError"
    assert root not in (tmp_path / "r.jsonl").read_text()
