"""`solbench validate --measured`: declared FLOPs and bytes against the counters of profiled records
(profiles read from the H200 probe in tests/fixtures/ncu)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.ncu import read_raw_csv
from solbench.data.profile import profile_from_kernels
from solbench.data.record import ResultRecord
from solbench.data.results import append_records
from solbench.errors import SolbenchError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
GEMM_FLOPS = 2 * 4096**3


def _record(solution: str, kernel_ids: list[int], flops: int, nbytes: int) -> ResultRecord:
    kernels = [k for k in read_raw_csv(str(FIXTURES / "probe_raw.csv")) if k.id in kernel_ids]
    return ResultRecord(problem="probe.gemm", workload="n4096", solution=solution, status="PASSED", device="NVIDIA H200",
                        gpu_spec="h200_sxm", time_s=2e-4, sol=0.7, flops=flops, bytes=nbytes, t_ideal_s=1.4e-4,
                        bound="compute", timestamp="2026-12-01T00:00:00Z", solbench_version="0",
                        profile=profile_from_kernels(kernels, "bfloat16"))


def test_a_formula_within_ten_percent_passes(tmp_path):
    dram = 148257280 + 27962880  # what the GEMM's counters say
    append_records(tmp_path / "r.jsonl", [_record("gemm", [5], GEMM_FLOPS, int(dram * 1.05))])
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path), "--all", "--format", "json"])
    assert out.exit_code == 0, out.output
    row = json.loads(out.stdout)[0]
    assert row["flops_ratio"] == 1.0 and abs(row["bytes_ratio"] - 1 / 1.05) < 1e-9 and not row["disagrees"]


def test_a_formula_off_by_half_is_listed_with_its_ratio(tmp_path):
    append_records(tmp_path / "r.jsonl", [_record("gemm", [5], GEMM_FLOPS // 2, 176220160)])
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path), "--format", "json"])
    assert out.exit_code == 1
    row = json.loads(out.stdout)[0]
    assert row["flops_ratio"] == 2.0 and row["disagrees"] and "more FLOPs counted" in row["note"]


def test_the_candidate_with_fewest_bytes_stands_for_the_formula(tmp_path):
    fused = _record("fused", [14], 0, 110289152)
    unfused = _record("unfused", [14, 6, 7], 0, 110289152)  # more kernels, more bytes
    append_records(tmp_path / "r.jsonl", [unfused, fused])
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path), "--all", "--format", "json"])
    row = json.loads(out.stdout)[0]
    assert row["candidate"] == "fused" and row["candidates"] == 2 and row["bytes_ratio"] == 1.0


def test_results_without_profiles_say_so_in_one_line(tmp_path):
    rec = _record("gemm", [5], GEMM_FLOPS, 1).model_copy(update={"profile": None})
    append_records(tmp_path / "r.jsonl", [rec])
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path)])
    assert isinstance(out.exception, SolbenchError)  # main() prints it on one line, exit 2
    assert "no profiled record" in str(out.exception) and "solbench profile" in str(out.exception)
