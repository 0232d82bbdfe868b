"""Charts and report that read right: labels that do not overlap, a hover title per point in SVG (and
inline in the report, where it works), noisy timings flagged, human labels with units, a workload table
whose width does not grow with the candidates."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
import record_factory as rf
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.text import Annotation
from record_factory import HtmlPage

from solbench.present.chart_style import to_bytes
from solbench.present.frame import records_frame
from solbench.present.label_layout import place_labels
from solbench.present.ranking import best_results
from solbench.present.report import build_report
from solbench.present.roofline_chart import NOISY_LABEL, roofline_figure
from solbench.present.sol_chart import sol_figure
from solbench.present.svg_marks import inline_svg

SVG = "{http://www.w3.org/2000/svg}"
NOISY_TIMING = {"method": "cpu", "n": 40, "median_s": 1e-3, "p90_s": 30e-3, "ci95_rel": 0.31}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, with_measured=False)
    noisy = next(r for r in rs.records if r.status == "PASSED" and r.problem.startswith("toy."))
    rs.records.remove(noisy)
    rs.records.append(noisy.model_copy(update={"timing": NOISY_TIMING}))
    return records_frame(rs.dicts())


def _boxes_overlap(a, b) -> bool:
    return min(a.x1, b.x1) > max(a.x0, b.x0) + 0.5 and min(a.y1, b.y1) > max(a.y0, b.y0) + 0.5


def _pairs_overlapping(boxes) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if _boxes_overlap(boxes[i], boxes[j])]


def test_place_labels_frees_a_dense_cluster_and_keeps_off_fixed_text():
    rng = np.random.default_rng(1)
    anchors = rng.normal([400, 300], 6, size=(30, 2))  # 30 labels within a few pixels
    size = np.full((30, 2), 12.0)
    fixed = np.array([[380, 320, 470, 332]])  # a roof label just above the cluster
    c = place_labels(anchors, size, anchors, fixed, (100, 100, 700, 500), offset=11)
    lo, hi = c - 6, c + 6
    for i in range(30):
        assert lo[i, 0] >= 100 and hi[i, 0] <= 700 and lo[i, 1] >= 100 and hi[i, 1] <= 500
        assert not (min(hi[i, 0], 470) > max(lo[i, 0], 380) and min(hi[i, 1], 332) > max(lo[i, 1], 320))
        for j in range(i + 1, 30):
            assert not (min(hi[i, 0], hi[j, 0]) > max(lo[i, 0], lo[j, 0])
                        and min(hi[i, 1], hi[j, 1]) > max(lo[i, 1], lo[j, 1])), (i, j)
    assert np.hypot(*(c - anchors).T).max() < 120  # still near the points they name


def _many_problems(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """``n`` problems whose points crowd one corner (copies of one problem's results, barely apart)."""
    one = frame[(frame["problem"] == frame["problem"].iloc[0]) & (frame["status"] == "PASSED")]
    parts = []
    for k in range(n):
        p = one.copy()
        p["problem"] = f"fam.p{k:02d}"
        p["achieved_flops_per_s"] *= 1 + 0.01 * k
        p["arithmetic_intensity"] *= 1 + 0.01 * k
        parts.append(p)
    return pd.concat(parts, ignore_index=True)


def test_library_chart_numbers_every_problem_without_overlap(frame):
    fig = roofline_figure(_many_problems(frame, 30))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    numbers = [t for t in ax.texts if isinstance(t, Annotation) and t.get_text().isdigit()]
    assert sorted(int(t.get_text()) for t in numbers) == list(range(1, 31))
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in numbers]
    assert _pairs_overlapping(boxes) == []
    roof_labels = [t.get_window_extent(renderer) for t in ax.texts if "FLOP/s" in t.get_text()]
    assert roof_labels and not any(_boxes_overlap(a, b) for a in boxes for b in roof_labels)


def test_workload_labels_of_one_problem_do_not_overlap(frame):
    one = frame[(frame["problem"] == frame["problem"].iloc[0]) & (frame["status"] == "PASSED")]
    crowd = []
    for k in range(14):  # 14 workloads at nearly one intensity
        w = one[one["workload"] == one["workload"].iloc[0]].copy()
        w["workload"] = f"decode_b{k}"
        w["arithmetic_intensity"] *= 1 + 0.002 * k
        crowd.append(w)
    fig = roofline_figure(pd.concat(crowd, ignore_index=True))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    names = [t for t in fig.axes[0].texts if t.get_text().startswith("decode_b")]
    assert len(names) == 14
    assert _pairs_overlapping([t.get_window_extent(renderer) for t in names]) == []


def _titles(svg: bytes) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter(f"{SVG}title")]


def test_svg_roofline_has_a_title_per_point(frame):
    passed = frame[frame["gpu"] == "h200_sxm"]
    svg = to_bytes(roofline_figure(passed), "svg")
    titles = _titles(svg)
    best = best_results(passed)
    best = best[(best["achieved_flops_per_s"] > 0) & (best["arithmetic_intensity"] > 0)]
    assert len(titles) == len(best)
    expected = {f"{r.problem} · {r.workload}\n{r.solution}" for r in best.itertuples()}
    assert {t.split(": SOL")[0] for t in titles} == expected
    assert sum("noisy timing" in t for t in titles) == (best["noisy"] != "").sum() == 1


def test_noisy_timing_is_ringed_with_a_legend_entry(frame):
    for fig in (roofline_figure(frame), sol_figure(frame)):
        legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
        assert any(t.startswith(NOISY_LABEL) for t in legend)
        rings = [c for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)
                 and c.get_linestyle()[0][1] is not None and not c.get_facecolors().any()]
        assert sum(len(c.get_offsets()) for c in rings) == 1
    quiet = frame[frame["noisy"] == ""]
    assert NOISY_LABEL not in [t.get_text() for lg in roofline_figure(quiet).legends for t in lg.get_texts()]


def test_inline_svg_keeps_drawing_only_and_prefixes_every_id():
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10pt" '
           b'height="10pt" viewBox="0 0 10 10" onload="alert(1)"><script>alert(2)</script>'
           b'<foreignObject><div>x</div></foreignObject><defs><clipPath id="c1"><rect width="5" height="5"/>'
           b'</clipPath><path id="m1" d="M0 0L1 1"/></defs><g clip-path="url(#c1)"><use xlink:href="#m1" x="1"/>'
           b'<a xlink:href="https://example.com"><text>hi</text></a><use xlink:href="https://example.com/x.svg#y"/>'
           b'</g></svg>')
    out = str(inline_svg(svg, "k", "a chart"))
    for bad in ("script", "alert", "foreignObject", "example.com", "<a ", "onload", 'width="10pt"'):
        assert bad not in out
    ids = set(re.findall(r'id="([^"]+)"', out))
    refs = re.findall(r'url\(#([^)]+)\)', out) + re.findall(r'href="#([^"]+)"', out)
    assert ids == {"k-c1", "k-m1"} and refs and set(refs) <= ids
    assert 'aria-label="a chart"' in out


def test_report_inlines_svg_charts_with_tooltips_and_flags_the_noisy_time(frame):
    html = build_report(frame, workers=1)
    page = HtmlPage(html)
    assert not page.all("img")  # SVG charts are inline, not images
    charts = page.all("svg")
    ok = frame[(frame["status"] == "PASSED") & (frame["flops"] > 0)]
    assert len(charts) == 1 + ok["problem"].nunique()  # the overview, then one per problem that does FLOPs
    assert html.count("<title>") - 1 == len(re.findall(r"<title>[^<]* · ", html))  # page title + one per point
    assert len(set(re.findall(r' id="([^"]+)"', html))) == len(re.findall(r' id="([^"]+)"', html))  # ids unique
    noisy = re.findall(r'<span class="badge NOISY" title="([^"]+)">noisy</span>', html)
    assert len(noisy) == 1 and "95% interval ±31% of the median" in noisy[0] and "p90 30.0x the median" in noisy[0]


def test_workload_table_is_as_wide_with_four_candidates_as_with_one(frame):
    def headers(df: pd.DataFrame) -> list[list[str]]:
        html = build_report(df, charts="none")
        tables = re.findall(r'<table class="workloads">.*?</thead>', html, re.S)
        return [re.findall(r"<th[^>]*>([^<]*)</th>", t) for t in tables]

    cands = sorted(frame["solution"].unique())
    assert len(cands) >= 4
    many, one = headers(frame), headers(frame[frame["solution"] == cands[0]])
    assert many[0] == one[0] == ["workload", "axes", "FLOP/B", "bound", "T_ideal", "candidate", "time", "SOL",
                                 "FLOP/s", "B/s"]


def test_small_sol_bars_show_and_are_to_scale(frame):
    html = build_report(frame, charts="none")
    widths = [float(w) for w in re.findall(r'<span class="fill[^"]*" style="width: ([\d.]+)%">', html)]
    best = best_results(frame)
    assert sorted(widths) == sorted(round(100 * min(1.0, s), 1) for s in best["sol"])
    assert ".solbar .fill { display: block; height: 100%; min-width: 2px;" in html


def test_environment_and_timing_read_as_labels_with_units(frame):
    html = build_report(frame, charts="none")
    env = html.split('id="environment"')[1].split('id="failures"')[0]
    labels = re.findall(r"<dt[^>]*>([^<]*)</dt>", env)
    assert labels and not [x for x in labels if re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", x)]  # no dotted keys
    assert "NVIDIA driver" in labels and "L2 flush size" in labels
    assert re.search(r'<dt title="timing.flush_bytes">L2 flush size</dt><dd>126 MB</dd>', env)
    assert re.search(r'<dt title="telemetry.sm_min_mhz">SM clock, lowest</dt><dd>1485 MHz</dd>', env)
