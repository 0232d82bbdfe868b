"""Charts: roofs, points and bars checked against the spec files and the factory's chosen SOLs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import matplotlib.image
import numpy as np
import pytest
import record_factory as rf
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.patches import Rectangle
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.hardware import load_spec
from solbench.data.roofline import workload_point
from solbench.errors import SolbenchError
from solbench.present.frame import Selection, records_frame, select
from solbench.present.plots import plot_roofline, plot_sol, roofline_figure, sol_figure

SEED = "llama3_1_8b.attn_o_proj_residual"


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    return rf.make_recordset(repeats=2)


@pytest.fixture()
def measured_specs(tmp_path, monkeypatch):
    rf.write_measured_spec(tmp_path / "specs")
    monkeypatch.setenv("SOLBENCH_SPECS", str(tmp_path / "specs"))


@pytest.fixture()
def df(recordset, measured_specs):
    return records_frame(recordset.dicts())


def _flat_lines(ax, y: float) -> list:
    return [ln for ln in ax.lines if len(ln.get_ydata()) == 2 and np.allclose(ln.get_ydata(), y, rtol=1e-9)]


def _expected_points(recordset: rf.RecordSet, problem_name: str, gpu: str = "h200_sxm") -> list[tuple[float, float]]:
    """(intensity, achieved FLOP/s) of each best result, from the problem file and the chosen SOL."""
    prob = next(p for p in rf.problems() if p.name == problem_name)
    spec = load_spec(gpu)
    out = []
    for (g, roof, p, _c, w), sol in recordset.truth.items():
        if (g, roof, p) == (gpu, "datasheet", problem_name):
            pt = workload_point(prob, w, spec)
            out.append((pt.flops / pt.bytes, pt.flops / (pt.t_ideal_s / sol)))
    return sorted(out)


def test_roofline_draws_datasheet_and_measured_roofs(df):
    fig = roofline_figure(select(df, Selection(gpu="h200_sxm", problem=SEED)))
    ax = fig.axes[0]
    ds, me = load_spec("h200_sxm"), rf.measured_spec()
    dashed = _flat_lines(ax, ds.peak_flops["bfloat16"])
    solid = _flat_lines(ax, me.peak_flops["bfloat16"])
    assert [ln.get_linestyle() for ln in dashed] == ["--"] and [ln.get_linestyle() for ln in solid] == ["-"]
    # The flat roof starts at the ridge point.
    assert dashed[0].get_xdata()[0] == pytest.approx(ds.peak_flops["bfloat16"] / ds.memory_bandwidth)
    diagonals = [ln for ln in ax.lines if ln.get_color() == "#333" and len(ln.get_xdata()) == 2
                 and ln.get_ydata()[0] != ln.get_ydata()[1]]
    slopes = sorted(float(ln.get_ydata()[1] / ln.get_xdata()[1]) for ln in diagonals)
    assert slopes == pytest.approx(sorted([me.memory_bandwidth, ds.memory_bandwidth]))
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "ridge 206 FLOP/B (bf16, datasheet)" in texts and "(bf16, measured)" in texts
    for w in ("decode_b1", "prefill_b2_s8192"):
        assert w in texts  # workload names above the axes


def test_roofline_points_are_the_best_results(recordset, df):
    fig = roofline_figure(select(df, Selection(gpu="h200_sxm", problem=SEED)))
    got = sorted(tuple(map(float, xy)) for c in fig.axes[0].collections if isinstance(c, PathCollection)
                 for xy in c.get_offsets())
    want = _expected_points(recordset, SEED)
    assert len(got) == len(want)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-9)


def test_trajectories_run_from_low_to_high_intensity(recordset, df):
    fig = roofline_figure(select(df, Selection(gpu="h200_sxm")))
    ax = fig.axes[0]
    segments = [seg for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]
    passes: dict[tuple[str, str], int] = {}
    for (g, r, p, c, _w) in recordset.truth:
        if (g, r) == ("h200_sxm", "datasheet"):
            passes[(c, p)] = passes.get((c, p), 0) + 1
    # One line per (candidate, problem) with two or more passed workloads, through all of them.
    assert sorted(len(s) for s in segments) == sorted(n for n in passes.values() if n > 1)
    for seg in segments:
        assert np.all(np.diff(seg[:, 0]) >= 0)
    fp32 = load_spec("h200_sxm").peak_flops["float32"]
    assert _flat_lines(ax, fp32), "a roof for every precision the results use"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "(3) toy.scan_fp32" in legend and "cheater (REWARD_HACK)" in legend
    assert not any(t.startswith("broken") for t in legend)  # nothing plotted, not in the legend


def test_no_measured_roof_without_a_measured_spec(recordset, monkeypatch):
    monkeypatch.delenv("SOLBENCH_SPECS", raising=False)
    df = records_frame(recordset.dicts())
    ax = roofline_figure(select(df, Selection(gpu="h100_sxm", problem=SEED))).axes[0]
    styles = {ln.get_linestyle() for ln in ax.lines if ln.get_color() == "#333" and len(ln.get_xdata()) == 2}
    assert styles == {"--"}


def test_unknown_spec_falls_back_to_the_records_roof(recordset):
    dicts = [d for d in recordset.dicts() if d["gpu_spec"] == "h200_sxm"]
    for d in dicts:
        d["gpu_spec"] = "lab_prototype_gpu"
    ax = roofline_figure(select(records_frame(dicts), Selection(problem=SEED))).axes[0]
    ds = load_spec("h200_sxm")
    flat = _flat_lines(ax, ds.peak_flops["bfloat16"])
    assert flat and flat[0].get_linestyle() == ":"


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_roofline_file_formats(df, tmp_path, suffix):
    out = plot_roofline(df, tmp_path / f"chart{suffix}", Selection(gpu="h200_sxm"))
    data = out.read_bytes()
    if suffix == ".png":
        img = matplotlib.image.imread(out)
        assert img.shape[0] > 600 and img.shape[1] > 1200 and img[..., :3].std() > 0.05
    elif suffix == ".svg":
        assert ET.fromstring(data).tag.endswith("svg")
    else:
        assert data.startswith(b"%PDF")


def test_plot_errors(df, tmp_path):
    with pytest.raises(SolbenchError, match="use a .png, .svg or .pdf"):
        plot_roofline(df, tmp_path / "chart.gif")
    with pytest.raises(SolbenchError, match="span 2 GPUs .*pass --gpu"):
        plot_roofline(df, tmp_path / "chart.png")
    failed_only = df[df["status"] != "PASSED"]
    with pytest.raises(SolbenchError, match="no PASSED result"):
        roofline_figure(select(failed_only, Selection(gpu="h200_sxm")))


def test_hostile_names_do_not_break_charts(recordset, tmp_path):
    dicts = recordset.dicts()
    for d in dicts:
        if d["solution"] == "torch_eager":
            d["solution"] = "$\\frac{1}{0}$ <b>\x1b[31m" + "x" * 200
    df = records_frame(dicts)
    plot_roofline(df, tmp_path / "r.png", Selection(gpu="h200_sxm", problem=SEED))
    plot_sol(df, tmp_path / "s.png", Selection(gpu="h200_sxm", problem="toy.rmsnorm"))


def test_sol_bars_are_the_best_sols(recordset, df):
    fig = sol_figure(select(df, Selection(gpu="h200_sxm", problem=SEED)))
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    want = sorted(s for (g, r, p, _c, _w), s in recordset.truth.items() if (g, r, p) == ("h200_sxm", "datasheet", SEED))
    assert sorted(b.get_height() for b in bars) == pytest.approx(want)
    prob = next(p for p in rf.problems() if p.name == SEED)
    spec = load_spec("h200_sxm")
    n_memory = sum(workload_point(prob, w, spec).bound == "memory" for w in prob.workloads)
    hatched = [b for b in bars if b.get_hatch()]
    passed_per_memory_wl = {(c, w) for (g, r, p, c, w) in recordset.truth if (g, r, p) == ("h200_sxm", "datasheet", SEED)
                            and workload_point(prob, w, spec).bound == "memory"}
    assert len(hatched) == len(passed_per_memory_wl) and n_memory == 3
    assert any(np.allclose(ln.get_ydata(), 1.0) for ln in ax.lines), "the SOL = 1 line"
    failures = sum(len(ln.get_xdata()) for ln in ax.lines if ln.get_marker() == "x")
    n_failed_cells = 7 * 6 - len(want)  # workloads x candidates minus the passed cells
    assert failures == n_failed_cells
    labels = [t.get_text() for t in ax.texts]
    assert "HACK" in labels and "CE" in labels and "T/O" in labels


def test_bar_values_read_as_in_the_leaderboard():
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates={"slow": (0.0005, 0.002), "fast": (0.812, 1.05)},
                           with_measured=False)
    ax = sol_figure(select(records_frame(rs.dicts()), Selection(problem="toy.rmsnorm"))).axes[0]
    heights = [p.get_height() for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    values = [t.get_text() for t in ax.texts if t.get_text()[:1].isdigit()]
    assert len(heights) == 6 and sorted(values) == sorted(rf.expected_sol(h) for h in heights)


def test_sol_chart_has_a_panel_per_problem(df):
    fig = sol_figure(select(df, Selection(gpu="h100_sxm")))
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == [SEED, "toy.rmsnorm", "toy.scan_fp32"]


def test_cli_plot_commands(tmp_path, recordset, measured_specs):
    f = recordset.write(tmp_path / "r.jsonl")
    runner = CliRunner()
    res = runner.invoke(app, ["plot", "roofline", str(f), "--gpu", "h200", "--problem", "toy.*", "-o",
                              str(tmp_path / "roof.svg"), "--title", "My chart"])
    assert res.exit_code == 0, res.output
    assert b"My chart" in (tmp_path / "roof.svg").read_bytes()
    res = runner.invoke(app, ["plot", "sol", str(f), "--gpu", "h100_sxm", "--roof", "datasheet", "-o",
                              str(tmp_path / "sol.pdf")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "sol.pdf").read_bytes().startswith(b"%PDF")


def test_sol_axis_turns_logarithmic_far_below_the_roof():
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates={"cpu_like": (0.002, 0.0005)},
                           with_measured=False)
    ax = sol_figure(select(records_frame(rs.dicts()), Selection(problem="toy.rmsnorm"))).axes[0]
    assert ax.get_yscale() == "log"
    heights = sorted(p.get_height() for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0)
    assert heights[0] > ax.get_ylim()[0] and max(heights) < 0.002  # every bar visible, none inflated


@pytest.mark.parametrize("kind", ["roofline", "sol"])
def test_a_chart_footnote_says_what_the_selection_left_out(df, monkeypatch, tmp_path, kind):
    from solbench.present import plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig) or path)
    getattr(plots, f"plot_{kind}")(df, tmp_path / "c.png", Selection(gpu="h200_sxm", problem=SEED))
    (footnote,) = [t.get_text() for t in figures[0].texts if "device:" in t.get_text()]
    n = int(((df["roof"] == "measured") & (df["problem"] == SEED)).sum())
    assert f"h200_sxm: {n} record(s) against the measured roof not shown (one roof per GPU): pass --roof measured " \
           "to see them" in footnote
