"""`solbench validate --measured`: declared FLOPs and bytes against the counters of profiled records
(profiles read from the H200 probe in tests/fixtures/ncu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.ncu import read_raw_csv
from solbench.data.profile import profile_from_kernels
from solbench.data.record import ResultRecord
from solbench.data.results import append_records
from solbench.errors import SolbenchError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "scaled_add"
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


def _library_with_probe(root: Path, measured: dict[str, str]) -> Path:
    """A problems folder holding ``probe.gemm`` whose file explains these disagreements."""
    folder = root / "probe" / "gemm"
    shutil.copytree(TINY, folder)
    data = yaml.safe_load((folder / "problem.yaml").read_text())
    data.update(name="probe.gemm", measured=measured)
    (folder / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root


def test_a_disagreement_explained_in_the_problem_file_is_shown_and_passes(tmp_path):
    append_records(tmp_path / "r.jsonl", [_record("gemm", [5], GEMM_FLOPS // 2, 176220160)])
    lib = _library_with_probe(tmp_path / "lib", {"flops": "the kernel computes the padded tile twice."})
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path / "r.jsonl"), "--problems", str(lib),
                                   "--format", "json"])
    assert out.exit_code == 0, out.output
    row = json.loads(out.stdout)[0]
    assert row["disagrees"] and not row["unexplained"]
    assert row["explained"] == "flops: the kernel computes the padded tile twice"
    table = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path / "r.jsonl"), "--problems", str(lib),
                                     "--format", "markdown"])
    assert "explained in the problem file: flops: the kernel computes" in table.stdout


def test_explaining_one_quantity_does_not_excuse_the_other(tmp_path):
    dram = 148257280 + 27962880
    append_records(tmp_path / "r.jsonl", [_record("gemm", [5], GEMM_FLOPS // 2, dram // 3)])  # both off
    lib = _library_with_probe(tmp_path / "lib", {"flops": "counted twice by design"})
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path / "r.jsonl"), "--problems", str(lib),
                                   "--format", "json"])
    assert out.exit_code == 1
    row = json.loads(out.stdout)[0]
    assert row["unexplained"] and row["explained"] == "flops: counted twice by design"
    assert "more DRAM bytes" in row["note"]


def test_a_problems_folder_that_is_not_there_is_refused_in_one_line(tmp_path):
    append_records(tmp_path / "r.jsonl", [_record("gemm", [5], GEMM_FLOPS // 2, 176220160)])
    out = CliRunner().invoke(app, ["validate", "--measured", str(tmp_path / "r.jsonl"), "--problems",
                                   str(tmp_path / "nowhere")])
    assert isinstance(out.exception, SolbenchError) and "--problems" in str(out.exception)
