"""The hierarchical roofline (`solbench plot roofline --levels`): each profiled kernel at HBM, L2 and L1,
from records whose profiles hold the H200 probe's kernels (tests/fixtures/ncu)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from solbench.data.hardware import load_spec
from solbench.data.ncu import read_raw_csv
from solbench.data.profile import profile_from_kernels
from solbench.data.record import ResultRecord
from solbench.present.frame import load_results
from solbench.present.levels_chart import level_points, level_roofs, levels_figure
from solbench.present.plots import plot_roofline

NCU = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
GEMM, RMSNORM = 5, range(6, 14)


def _record(solution: str, kernel_ids, l2_factor: float, l1_factor: float) -> ResultRecord:
    kernels = [k for k in read_raw_csv(str(NCU / "probe_raw.csv")) if k.id in kernel_ids]
    profile = profile_from_kernels(kernels, "bfloat16", process_id=575)
    for k in profile.kernels:  # the probe collected no lts__t_bytes / l1tex__t_bytes: give each level its bytes
        dram = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
        k.l2_bytes, k.l1_bytes = dram * l2_factor, dram * l1_factor
    return ResultRecord(problem="p", workload="w", solution=solution, status="PASSED", device="NVIDIA H200",
                        gpu_spec="h200_sxm", time_s=1e-3, sol=0.5, flops=2 * 4096**3, bytes=3 * 2 * 4096**2,
                        t_ideal_s=5e-4, bound="compute", timestamp="2026-12-01T00:00:00Z", solbench_version="0",
                        compute_dtype="bfloat16", profile=profile)


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "profiles.jsonl"
    recs = [_record("gemm", {GEMM}, 2.0, 8.0), _record("eager_rmsnorm", set(RMSNORM), 1.5, 4.0)]
    path.write_text("".join(r.to_json_line() + "\n" for r in recs))
    return path


def test_each_kernel_with_flops_is_a_point_at_each_level(results):
    df = load_results([results], warn=False)
    points, no_flops = level_points(df)
    gemm = points[points["solution"] == "gemm"].set_index("level")
    k = read_raw_csv(str(NCU / "probe_raw.csv"))[GEMM]
    dram = k.metrics["dram__bytes_read.sum"] + k.metrics["dram__bytes_write.sum"]
    flops, seconds = 2 * 4096**3, k.metrics["gpu__time_duration.sum"]
    assert gemm.loc["dram", "intensity"] == pytest.approx(flops / dram)
    assert gemm.loc["l2", "intensity"] == pytest.approx(flops / (2 * dram))
    assert gemm.loc["l1", "intensity"] == pytest.approx(flops / (8 * dram))
    assert list(gemm["flops_per_s"]) == pytest.approx([flops / seconds] * 3)  # one height for its three points
    rms = points[points["solution"] == "eager_rmsnorm"]
    assert len(rms) % 3 == 0 and no_flops == 8 - len(rms) // 3  # kernels counting no FLOPs are left out


def test_the_roofs_come_from_the_spec_else_from_ncus_peaks(results):
    df = load_results([results], warn=False)
    spec = load_spec("h200_sxm")
    assert [(r.level, r.bandwidth) for r in level_roofs(spec, df)] == [
        ("dram", spec.memory_bandwidth), ("l2", spec.l2_bandwidth), ("l1", spec.l1_bandwidth)]
    no_levels = spec.model_copy(update={"l2_bandwidth": None, "l1_bandwidth": None})
    df["profile.summary.l2_peak_bytes_per_s"] = 9.0e12
    roofs = {r.level: r for r in level_roofs(no_levels, df)}
    assert roofs["l2"].bandwidth == 9.0e12 and "ncu" in roofs["l2"].source and "l1" not in roofs


def test_plot_roofline_levels_writes_the_chart(results, tmp_path):
    out = plot_roofline(load_results([results], warn=False), tmp_path / "levels.png", levels=True)
    assert out.stat().st_size > 10_000
    fig = levels_figure(load_results([results], warn=False))
    texts = " ".join(t.get_text() for t in fig.legends[0].get_texts())
    assert "HBM 4.8 TB/s" in texts and "L2 10.2 TB/s" in texts and "L1 30.9 TB/s" in texts


def test_the_cli_draws_it_and_refuses_records_without_profiles(results, tmp_path, monkeypatch, capsys):
    from solbench.cli import main

    def cli(*args):
        monkeypatch.setattr(sys, "argv", ["solbench", "plot", "roofline", *args])
        with pytest.raises(SystemExit) as info:
            main()
        return info.value.code, capsys.readouterr()

    code, out = cli(str(results), "--levels", "-o", str(tmp_path / "h.svg"))
    assert code in (0, None) and "hierarchical roofline" in out.out and (tmp_path / "h.svg").is_file()
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({**json.loads(line), "profile": None}) + "\n"
                             for line in results.read_text().splitlines() if line.strip()))
    code, out = cli(str(plain), "--levels", "-o", str(tmp_path / "x.svg"))
    assert code not in (0, None) and "no profiled kernel" in out.err and "Traceback" not in out.err


def test_the_report_shows_utilization_diagnosis_and_the_levels_chart(results, tmp_path):
    from solbench.present.report import build_report

    failed = _record("broken", {GEMM}, 2.0, 8.0).model_copy(update={"profile": None})
    failed.profile = profile_from_kernels([], "bfloat16").model_copy(update={"status": "failed",
                                                                             "reason": "ncu: ERR_NVGPUCTRPERM"})
    more = tmp_path / "more.jsonl"
    more.write_text(failed.to_json_line() + "\n")
    html = build_report(load_results([results, more], warn=False), charts="png", workers=1)
    table = html[html.index("Profile (Nsight Compute)"):]
    gemm = load_results([results], warn=False).set_index("solution").loc["gemm"]
    assert f"{gemm['profile.summary.tensor_pipe_pct']:.0f}%" in table  # the GEMM's tensor pipes, from its counters
    assert "compute bound (tensor pipes)" in table and "latency bound" in table
    assert "not profiled: ncu: ERR_NVGPUCTRPERM" in table
    assert 'alt="hierarchical roofline' in table and "data:image/png;base64," in table
