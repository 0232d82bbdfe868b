"""Every key the engine writes into a record's parts is declared there: the real producers (timing, the burst
and the parent's outside view, telemetry, the environment, comparisons, findings, edge entries) are run or
called here and their output checked by the record's part models; what the CUDA paths write (no GPU here) is
read from their source. A worker's forged timing keys or findings do not reach the record."""

from __future__ import annotations

import inspect
import os
import re
import time
from types import SimpleNamespace

import pytest
import torch

from solbench.data.record_parts import (
    BurstAttempt,
    BurstReport,
    EdgeRoundEntry,
    Environment,
    FindingEntry,
    Harness,
    NvmlView,
    OutputComparison,
    Telemetry,
    Timing,
    TimingClock,
    TimingCupti,
    TimingDetails,
)
from solbench.engine import burst, environment, evaluation, telemetry
from solbench.engine.correctness import MalformedReply, compare_tensors
from solbench.engine.edge import EdgeRound
from solbench.engine.verification import after_timing, draw_plan
from solbench.guards import Observer
from solbench.guards.findings import REWARD_HACK, Finding
from solbench.timing import TimingConfig, time_calls
from solbench.timing.clockprobe import summarize_chunks


def test_a_cpu_timing_as_the_worker_sends_it_is_declared():
    config = TimingConfig(device="cpu", warmup_s=0.005, min_samples=8, max_samples=20, budget_s=0.05)
    result, _ = time_calls(lambda i: i + 1, 2, config)
    timing = evaluation._valid_timing(result.as_dict())  # the parent's reading of the worker's reply
    assert Timing.model_validate(timing).details.sampling_s > 0


def _keys_written(module: object, target: str) -> set[str]:
    """Keys a module's source writes into ``target``: ``target["k"] = ``, ``target.update(k=...)``,
    ``target.setdefault("k", ...)``."""
    src = inspect.getsource(module)
    keys = set(re.findall(rf'{target}\["(\w+)"\]\s*=(?!=)', src))
    keys |= set(re.findall(rf'{target}\.setdefault\("(\w+)"', src))
    for call in re.findall(rf"{target}\.update\(([^)]*)\)", src, flags=re.S):
        keys |= set(re.findall(r"(\w+)=", call))
    return keys


def test_the_cuda_timers_details_and_cupti_keys_are_declared():
    from solbench.timing import cuda

    details = {k for k in _keys_written(cuda, r"st\.details") | _keys_written(cuda, r"self\.details")
               if not k.startswith("_")}  # "_..." are the loop's own, popped before the result is made
    assert {"graph_calls_per_replay", "span_tick_s", "ci_checks", "empty_window_s"} <= details  # the scan works
    assert details <= set(TimingDetails.model_fields), details - set(TimingDetails.model_fields)
    info = re.search(r'info = \{"timer".*?\}\n', inspect.getsource(cuda._all_stream_samples), flags=re.S).group(0)
    assert set(re.findall(r'"(\w+)":', info)) == set(TimingCupti.model_fields)


def test_the_clock_summary_is_declared():
    info, _ = summarize_chunks([1500.0, 1700.0, None], [10, 10, 5], 1980.0, 2e-6)
    info["backend"] = "triton"  # as solbench.timing.cuda adds it
    assert set(info) == set(TimingClock.model_fields) - {"reason"}
    TimingClock.model_validate(info)
    TimingClock.model_validate(summarize_chunks([None], [3], 1980.0, 2e-6)[0])


def _fake_nvml() -> SimpleNamespace:
    """NVML's calls as solbench.guards.outside makes them, answering with fixed samples."""
    sample = SimpleNamespace(timeStamp=20, sampleValue=SimpleNamespace(uiVal=40))
    return SimpleNamespace(
        NVML_GPU_UTILIZATION_SAMPLES=1,
        nvmlDeviceGetSamples=lambda handle, kind, since: (0, [sample, sample]),
        nvmlDeviceGetProcessUtilization=lambda handle, since: [SimpleNamespace(timeStamp=20, pid=7, smUtil=35)],
        nvmlDeviceGetComputeRunningProcesses=lambda handle: [SimpleNamespace(pid=7)])


def test_a_burst_and_the_outside_view_as_the_engine_writes_them_are_declared():
    cases = burst_cases()
    plan = draw_plan(cases, 10)
    sets = [[v.clone() for v in after_timing(cases, plan, 40, i).values()] for i in range(len(cases.sets))]
    room: dict = {}

    def request(header, timeout_s, max_bytes):  # the worker's side, in this process
        from solbench.timing import drive
        from solbench.worker import burst_plan, output_buffers, stage_edits

        if header["op"] == "burst_prepare":
            room["b"] = output_buffers(header["calls"], header["expect"], "cpu")
        if header["op"] != "burst":
            return {"ok": True}
        drive(burst_plan(sets, header["calls"], stage_edits(sets, header["edits"], header["calls"]), room["b"]),
              lambda x, y: x * 2 + y)
        return {"ok": True, "stacked": room["b"], "misfits": []}

    expect = [{"shape": list(v.shape), "dtype": "float32"} for v in cases.sets[0].expected.values()]
    summary, _ = burst.run_burst(request, cases, plan, 40, {"median_s": 1e-5}, expect, "cpu",
                                 time.monotonic() + 30, Observer(os.getpid(), "cpu").start)
    report = BurstReport.model_validate(summary)
    outside = report.attempts[0].outside
    assert outside is not None and outside.cores == len(os.sched_getaffinity(0)) and outside.outside_cpu_s >= 0
    assert 0 <= report.attempts[0].outside_share
    # A GPU's attempt: NVML's view and its reading per call join the attempt.
    observer = object.__new__(Observer)
    observer.nvml, observer.handle, observer.pid = _fake_nvml(), None, 7
    view = observer._device_view(0, 1.0)
    NvmlView.model_validate(view)
    attempt = dict(summary["attempts"][0], outside=dict(summary["attempts"][0]["outside"], nvml=view))
    burst.judge_gpu(attempt, 1e-5, {"nvml": view | {"device_util_samples": 5}}, 100)
    assert attempt["ratio_device"] > 0
    BurstAttempt.model_validate(attempt)


def burst_cases():
    from pathlib import Path

    from solbench.data.problem import load_problem
    from solbench.engine.cases import prepare_cases
    from solbench.engine.problem_code import load_reference

    problem = load_problem(Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "scaled_add")
    w = next(w for w in problem.workloads if w.name == "n32")
    return prepare_cases(problem, w, base_seed=5, device="cpu", rounds=1, ref_fn=load_reference(problem), gen_fn=None)


def test_telemetry_of_every_kind_is_declared():
    nvml = telemetry.summarize([{"sm_mhz": 1980.0, "mem_mhz": 3200.0, "temperature_c": 40.0, "power_w": 300.0}],
                               4, 1000, 4000, 0.5, 0.05, ["clocks_event_reasons: NVMLError"])
    cpu = telemetry.cpu_load_summary([1] * 10, [5] * 10, [1, 2], 2, 0.5)
    for t in (nvml, cpu, telemetry.unavailable("no NVML")):
        Telemetry.model_validate(t)
    assert {"errors", "energy_j", "sm_max_mhz"} <= set(nvml) and {"kind", "machine_busy", "steal_share"} <= set(cpu)


def test_the_environment_is_declared():
    Environment.model_validate(collect := environment.collect_environment("cpu") | {"seed": None})
    assert collect["packages"]
    literal = re.search(r"info: dict\[str, Any\] = \{(.*?)\}", inspect.getsource(environment.cuda_device_info), re.S)
    gpu_keys = _keys_written(environment, "info") | set(re.findall(r'"(\w+)":', literal.group(1)))
    gpu_keys |= {"persistence_mode", "power_limit_w", "mig_mode", "nvml"}  # _nvml_info's, by name in a loop
    assert {"gpu_name", "sm_count", "l2_bytes", "gpu_uuid"} <= gpu_keys
    assert gpu_keys <= set(Environment.model_fields), gpu_keys - set(Environment.model_fields)


def test_comparisons_findings_and_edge_entries_are_declared():
    bad = compare_tensors(torch.tensor([1.0, float("inf"), 3.0]), torch.tensor([1.0, 2.0, 4.0]), 1e-3, 1e-3)
    assert not bad.passed
    OutputComparison.model_validate(bad.as_dict())
    FindingEntry.model_validate(Finding("other_process", REWARD_HACK, "pid 9 worked", {"pids": [9]}).as_dict())
    entry = EdgeRound.entry(SimpleNamespace(name="zeros", shape="small", axes={"N": 2}, skipped=None), "why")
    EdgeRoundEntry.model_validate(entry)


def test_the_harness_keys_the_evaluation_and_runner_write_are_declared():
    from solbench.engine import runner

    keys = _keys_written(evaluation, r"ctx\.harness") | _keys_written(evaluation, r"self\.startup")
    keys |= _keys_written(evaluation, "used") | _keys_written(runner, "harness")
    keys |= set(re.findall(r'key = "(\w+)"', inspect.getsource(evaluation._charge_failed)))
    assert {"first_call_s", "rounds_s", "worker_start_s", "transport_fallback", "burst_s"} <= keys
    assert keys <= set(Harness.model_fields), keys - set(Harness.model_fields)


def test_a_forged_timing_key_is_a_protocol_violation_not_a_record_key():
    good = {"samples_s": [1e-3, 1.1e-3, 0.9e-3], "method": "cpu"}
    assert evaluation._valid_timing(good)["median_s"] == pytest.approx(1e-3)
    for forged, where in (({"payload": "x" * 100}, "payload"), ({"details": {"note": 1}}, "details.note"),
                          ({"method": ["cpu"]}, "method")):
        with pytest.raises(MalformedReply, match=re.escape(where)):
            evaluation._valid_timing(good | forged)


def test_a_workers_findings_reach_the_record_as_findings_only():
    reply = {"findings": [{"kind": "output_alias", "status": "INCORRECT", "reason": "out is x", "extra": 1},
                          {"note": "not a finding"}, {"kind": "k", "status": "PASSED", "reason": "r"}]}
    found = evaluation._findings(reply)
    assert found == [{"kind": "output_alias", "status": "INCORRECT", "reason": "out is x", "details": {}}]
    with pytest.raises(MalformedReply):
        evaluation._findings({"findings": ["text"]})


def test_the_cost_summary_and_the_git_facts_are_declared():
    from solbench.data.cost import Cost, cost_summary
    from solbench.data.record_parts import CostSummary, GitInfo
    from solbench.engine import provenance

    _, summary = cost_summary(SimpleNamespace(name="p.q", cost="reference.py:cost"), [Cost(10, 20), Cost(30, 40)])
    assert CostSummary.model_validate(summary).flops_max == 30
    git = provenance.candidate_git(__file__, "record-keys")  # this repository's checkout
    if git is not None:
        GitInfo.model_validate(git)
    src = inspect.getsource(provenance._repo_info.__wrapped__)
    written = set(re.findall(r'info\["(\w+)"\]', src)) | set(re.findall(r'"(\w+)": commit', src))
    assert {"commit", "dirty", "committed_at", "branch", "dirty_note"} == written
    assert written <= set(GitInfo.model_fields)
