"""A new user on a CPU: `run` takes the small workload of a big problem unless asked, `--problems`,
a Triton candidate skipped in one line without a GPU, calibrate-then-run that works every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench import api
from solbench.cli import app
from solbench.data.library import resolve_problem
from solbench.worker.candidate import DEVICE_REQUIREMENT, missing_requirements, shipped_candidates

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
RMSNORM = ROOT / "problems" / "llama3_1_8b" / "rmsnorm"


def _solbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A CPU user's `solbench`: without Triton's interpreter (tests/library turns it on for its own
    kernels, in os.environ, at import: one pytest session over both folders leaked it here)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=env)


def test_on_a_cpu_a_big_problem_runs_its_small_workload_and_says_so():
    rmsnorm = resolve_problem("llama3_1_8b.rmsnorm", None)
    biggest = max(rmsnorm.auto_bytes(rmsnorm.resolve_axes(w)) for w in rmsnorm.workloads)
    assert biggest > api.CPU_BIG_BYTES  # T=16384 x 4096 bf16 in and out
    heard: list[str] = []
    assert api.cpu_small_default(["llama3_1_8b.rmsnorm"], "cpu", None, heard.append)
    assert len(heard) == 1 and "--all-workloads" in heard[0] and "llama3_1_8b.rmsnorm" in heard[0]
    assert not api.cpu_small_default(["llama3_1_8b.rmsnorm"], "cuda", None, heard.append)
    assert not api.cpu_small_default([TINY / "scaled_add"], "cpu", None, heard.append)  # small already: all of it
    assert len(heard) == 1


def test_run_names_problems_in_the_folder_given_by_problems():
    res = CliRunner().invoke(app, ["run", "tiny.scaled_ad", "--problems", str(TINY), "--device", "cpu"])
    assert res.exit_code != 0
    assert "tiny.scaled_add" in str(res.exception) + res.output  # the near miss, found in that folder


def test_a_triton_candidate_needs_a_gpu_unless_the_interpreter_is_on(monkeypatch):
    import torch

    triton_file = RMSNORM / "solutions" / "triton_rmsnorm.py"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    expected = [] if torch.cuda.is_available() else [DEVICE_REQUIREMENT]
    assert missing_requirements(triton_file) == expected
    assert missing_requirements(RMSNORM / "solutions" / "torch_eager.py") == []
    assert (triton_file in shipped_candidates(RMSNORM)) == torch.cuda.is_available()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert missing_requirements(triton_file) == []


@pytest.mark.slow
def test_run_small_on_a_cpu_exits_0_with_the_triton_candidate_skipped_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the Triton candidate runs")
    r = _solbench("run", "llama3_1_8b.rmsnorm", "--small", "--device", "cpu", "-o", str(tmp_path / "r.jsonl"), "-q",
                  "--budget", "0.05")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped: llama3_1_8b.rmsnorm triton_rmsnorm.py: needs a CUDA device, none here" in r.stderr
    assert "active drivers" not in r.stdout + r.stderr


@pytest.mark.slow
def test_calibrate_quick_then_a_bf16_run_works_every_time(tmp_path, monkeypatch):
    """Ten in a row, as the README says it: `calibrate --quick -o X.yaml`, then `run llama3_1_8b.rmsnorm
    --small --device cpu --gpu X.yaml` with every shipped candidate. The spec always has bf16 (it was
    dropped under 1 GFLOP/s) and no honest candidate on it is refused by the physics floor (the eager
    one, nor torch.compile's faster one); the Triton one is skipped without a GPU (about 7 min)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # as the subprocesses run (_solbench)
    shipped = {p.stem for p in shipped_candidates(RMSNORM)}
    assert {"torch_eager", "torch_compile"} <= shipped
    for i in range(10):
        spec = tmp_path / f"X{i}.yaml"
        cal = _solbench("calibrate", "--quick", "--device", "cpu", "-o", str(spec))
        assert cal.returncode == 0, cal.stderr
        out = tmp_path / f"r{i}.jsonl"
        r = _solbench("run", "llama3_1_8b.rmsnorm", "--small", "--device", "cpu", "--gpu", str(spec), "-q",
                      "--budget", "0.05", "-o", str(out))
        assert r.returncode == 0, (i, r.stdout[-3000:], r.stderr[-2000:])
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert {rec["solution"] for rec in records} == shipped, (i, r.stderr[-2000:])
        assert all(rec["status"] == "PASSED" and rec["gpu_spec"].startswith(f"x{i}_") for rec in records), \
            (i, [(rec["solution"], rec["status"], rec.get("reason")) for rec in records])


def test_specs_lists_the_builtin_cpu_estimate():
    res = CliRunner().invoke(app, ["specs", "--format", "json"])
    assert res.exit_code == 0, res.output
    ids = [s["id"] for s in json.loads(res.output)]
    assert "cpu_estimate" in ids and "h200_sxm" in ids


def test_model_without_results_shows_the_ideal_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/ here
    res = CliRunner().invoke(app, ["model", "llama3_1_8b", "--json"])
    assert res.exit_code == 0, res.output
    view = json.loads(res.stdout)
    assert view["gpu"] == "h200_sxm" and not view["missing"]
    assert all(op["t_ideal_s"] > 0 for op in view["ops"]) and len(view["ops"]) >= 5


def test_model_on_calibrated_records_names_the_spec_file(tmp_path):
    from solbench.data.record import ResultRecord

    spec = tmp_path / "cal" / "cpu.yaml"
    spec.parent.mkdir()
    data = {"id": "cpu_host_20261201t000000", "name": "a CPU", "kind": "measured", "vendor": "x86_64",
            "device_type": "cpu", "memory_bandwidth": 3.0e10, "peak_flops": {"bfloat16": 1.0e11, "float32": 1.0e11},
            "measured": {"method": "test", "timestamp": "2026-12-01T00:00:00+00:00", "device": "CPU"}}
    import yaml

    spec.write_text(yaml.safe_dump(data))
    rec = ResultRecord(problem="llama3_1_8b.rmsnorm", workload="decode_b1", solution="torch_eager", status="PASSED",
                       device="cpu", gpu_spec=data["id"], roof="measured", time_s=1e-4, sol=0.01, flops=10, bytes=10,
                       t_ideal_s=1e-6, bound="memory", timestamp="2026-12-01T00:00:00+00:00", solbench_version="0")
    results = tmp_path / "r.jsonl"
    results.write_text(rec.to_json_line())
    res = CliRunner().invoke(app, ["model", "llama3_1_8b", str(results)])
    assert res.exit_code != 0 and "--gpu PATH" in str(res.exception) + res.output
    res = CliRunner().invoke(app, ["model", "llama3_1_8b", str(results), "--gpu", str(spec), "--json"])
    assert res.exit_code == 1  # the other ops have no record
    missing = json.loads(res.stdout)["missing"]
    assert missing and all(f"--gpu {spec}" in line for line in missing)  # a command that works as printed


def test_the_demo_says_when_timings_are_noisy_and_why():
    from solbench.cli.engine import noisy_note
    from solbench.data.record import ResultRecord

    def rec(flags):
        return ResultRecord(problem="p.op", workload="w", solution="c", status="PASSED", device="cpu",
                            gpu_spec="cpu_estimate", time_s=1e-4, sol=0.01, flops=1, bytes=1, t_ideal_s=1e-6,
                            bound="memory", timestamp="2026-12-01T00:00:00+00:00", solbench_version="0", flags=flags)

    assert noisy_note([rec([]), rec([])]) == []
    (line,) = noisy_note([rec(["noisy_timing", "machine_busy"]), rec(["noisy_timing"]), rec([])])
    assert line.startswith("2 of 3 timings are noisy") and "busy during 1 of them" in line and "((" not in line


def test_run_tables_read_in_80_columns():
    """Nothing folded letter by letter ("PASSE / D", "worklo / ad") and no line past 80 columns; the
    reasons are lines under the table, whole."""
    import io

    from rich.console import Console

    from solbench.cli.engine import results_tables
    from solbench.data.record import ResultRecord

    common = dict(problem="llama3_1_8b.attn_o_proj_residual", device="cpu", gpu_spec="cpu_vm_20261202t004648",
                  flops=33554432, bytes=33579008, bound="memory", timestamp="2026-12-01T00:00:00+00:00",
                  solbench_version="0", t_ideal_s=1e-3)
    rows = [ResultRecord(workload="decode_b1", solution="torch_eager", status="PASSED", time_s=1.57e-2, sol=0.0652,
                         timing={"median_s": 1.57e-2, "p90_s": 2e-2, "ci95_rel": 0.18}, **common),
            ResultRecord(workload="prefill_b1_s2048", solution="triton_o_proj", status="RUNTIME_ERROR",
                         time_s=None, sol=None, reason="RuntimeError: boom (at triton_o_proj.py:12)", **common)]
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=False)
    for table in results_tables(rows, console.width):
        console.print(table)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = buf.getvalue()
    for word in ("decode_b1", "torch_eager", "PASSED noisy", "RUNTIME_ERROR", "prefill_b1_s2048", "0.0652"):
        assert word in text, word
    assert "prefill_b1_s2048 triton_o_proj: RuntimeError: boom (at triton_o_proj.py:12)" in text
    assert "noisy timing: 95% interval ±18% of the median" in text
