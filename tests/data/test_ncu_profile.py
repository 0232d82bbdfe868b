"""Nsight Compute exports from the H200 (tests/fixtures/ncu, ncu 2025.3.1) read into profiles, checked
against what the probe's kernels must have done: a 4096^3 bf16 GEMM, a 64 MiB fp32 ``x * 2`` (Triton)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solbench.data.ncu import NcuFormatError, parse_raw_csv, read_raw_csv, unit_scale
from solbench.data.profile import ProfileSummary, diagnose, profile_from_kernels
from solbench.data.record import ResultRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
H200_BF16_DENSE = 989.4e12


@pytest.fixture(scope="module")
def kernels():
    return {k.id: k for k in read_raw_csv(str(FIXTURES / "probe_raw.csv"))}


def test_units_come_back_in_base_units():
    assert unit_scale("Mbyte") == 1e6 and unit_scale("us") == 1e-6 and unit_scale("Ghz") == 1e9
    assert unit_scale("Tbyte/s") == 1e12 and unit_scale("Kbyte/cycle") == 1e3 and unit_scale("%") == 1.0


def test_gemm_counts_2mnk_flops_under_the_roof(kernels):
    p = profile_from_kernels([kernels[5]], "bfloat16")
    k = p.kernels[0]
    assert k.flops == {"tensor_bfloat16": 2 * 4096**3}
    assert k.duration_s == pytest.approx(177.632e-6)
    assert p.summary.flops / k.duration_s < H200_BF16_DENSE  # a count that breaks the roof would be wrong
    # A and B (2 x 32 MiB bf16) are read at least once; the 32 MiB output is written, partly left in L2
    assert 2 * 2 * 4096**2 <= k.dram_read_bytes <= 4 * 2 * 2 * 4096**2
    assert 0 < k.dram_write_bytes <= 2 * 4096**2
    assert k.registers_per_thread == 168 and k.block_size == 384 and k.shared_mem_bytes == pytest.approx(213188)
    assert p.summary.tensor_pipe_pct > 90 and p.summary.diagnosis == "compute bound (tensor pipes)"


def test_elementwise_scale_moves_its_bytes_and_counts_one_flop_per_element(kernels):
    p = profile_from_kernels([kernels[14]], "float32")
    elements = 64 * 2**20 // 4
    assert p.kernels[0].flops["float32"] == pytest.approx(elements, rel=1e-6)  # from rate x cycles
    assert p.summary.dram_read_bytes == pytest.approx(4 * elements, rel=0.01)
    assert p.summary.diagnosis == "bandwidth bound (DRAM)"
    assert p.summary.dram_peak_bytes_per_s == pytest.approx(4.8e12, rel=0.02)  # ncu's peak = the datasheet's


def test_eager_rmsnorm_sums_its_kernels(kernels):
    parts = [kernels[i] for i in range(6, 14)]
    p = profile_from_kernels(parts, "bfloat16")
    assert p.summary.kernels == 8
    assert p.summary.duration_s == pytest.approx(sum(k.metrics["gpu__time_duration.sum"] for k in parts))
    assert p.summary.dram_bytes == pytest.approx(sum(k.metrics["dram__bytes_read.sum"] +
                                                     k.metrics["dram__bytes_write.sum"] for k in parts))
    assert p.summary.diagnosis.startswith("latency bound")


def test_profile_round_trips_through_a_record(kernels):
    p = profile_from_kernels([kernels[5]], "bfloat16", raw="x.ncu/a.csv.gz", process_id=575)
    rec = ResultRecord(problem="p", workload="w", solution="s", status="PASSED", device="d", gpu_spec="h200_sxm",
                       time_s=1e-3, sol=0.5, flops=1, bytes=1, t_ideal_s=5e-4, bound="compute", timestamp="t",
                       solbench_version="0", profile=p)
    back = ResultRecord.model_validate_json(rec.to_json_line())
    assert back.profile.summary.flops == 2 * 4096**3 and back.profile.process_id == 575


def test_the_process_filter_and_the_nvtx_columns_parse(kernels):
    assert {k.process_id for k in kernels.values()} == {575}
    assert kernels[14].name == "_scale"


def test_text_that_is_not_an_export_is_refused():
    with pytest.raises(NcuFormatError, match="not an `ncu --page raw --csv` export"):
        parse_raw_csv("==PROF== Disconnected\nsomething else\n")


@pytest.mark.parametrize(("summary", "dtype", "expected"), [
    (ProfileSummary(kernels=1, duration_s=1.0, dram_pct=90, sm_pct=10, sm_busy_pct=10), "bfloat16", "SM busy is low"),
    (ProfileSummary(kernels=1, duration_s=1.0, dram_pct=10, sm_pct=85, tensor_pipe_pct=2), "bfloat16", "tensor pipes idle"),
    (ProfileSummary(kernels=1, duration_s=1.0, dram_pct=10, sm_pct=85, tensor_pipe_pct=2), "float32", "compute bound"),
    (ProfileSummary(kernels=1, duration_s=1.0, dram_pct=20, sm_pct=20, l2_pct=80), "bfloat16", "L2 bandwidth bound"),
    (ProfileSummary(kernels=1, duration_s=1.0, dram_pct=20, sm_pct=20, occupancy_pct=5), None, "low occupancy"),
])
def test_diagnosis_rules(summary, dtype, expected):
    assert expected in diagnose(summary, dtype)
