"""The HTML report: self-contained, escaped, complete; its numbers are the records' numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
import record_factory as rf
from record_factory import HtmlPage
from typer.testing import CliRunner

from solbench.cli import app
from solbench.present.frame import Selection, load_results, records_frame
from solbench.present.report import build_report, present_demo, write_report
from solbench.units import si

SEED = "llama3_1_8b.attn_o_proj_residual"
HOSTILE_LOG = "</pre></details><script>alert(1)</script><img src=x onerror=alert(2)>"


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    rs = rf.make_recordset(repeats=2)
    rs.records.append(rf.hostile_record(log=HOSTILE_LOG))
    return rs


@pytest.fixture(scope="module")
def html(recordset) -> str:
    return build_report(records_frame(recordset.dicts()), title="Test <report>", workers=1)


def test_self_contained_and_no_script(html):
    page = HtmlPage(html)
    assert not page.all("script") and not page.all("link") and not page.all("iframe")
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not (name or "").startswith("on"), (tag, name)  # no event handlers anywhere
            if name in ("src", "href"):
                assert value and (value.startswith("data:image/") or value.startswith("#")), (tag, value)
    csp = [a for a in page.all("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]
    assert not re.search(r"https?://", re.sub(r"data:image/[^\"]+", "", html))


def test_hostile_text_is_escaped(html):
    assert "<script>alert" not in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html  # the candidate name, shown as text
    assert "&lt;/pre&gt;&lt;/details&gt;&lt;script&gt;alert(1)" in html  # the log, shown as text
    assert "<title>Test &lt;report&gt;</title>" in html


def test_sections_tables_and_charts(html):
    page = HtmlPage(html)
    tables = [a.get("class", "") for a in page.all("table")]
    assert tables.count("leaderboard overall") == 2  # one per GPU
    assert tables.count("leaderboard problem") == 6 and tables.count("workloads") == 6  # 3 problems x 2 GPUs
    assert tables.count("failures") == 1
    charts = re.findall(r'<svg [^>]*class="chart".*?</svg>', html, re.S)
    assert len(charts) == 6 + 2  # a roofline per section, an overview roofline per GPU: inline, so tooltips work
    for chart in charts:
        assert ET.fromstring(chart.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink='
                                           '"http://www.w3.org/1999/xlink" ', 1)).find(".//{*}title") is not None
    ids = {a.get("id") for _, a in page.tags}
    assert {"leaderboard", "environment", "timing", "failures", "p1", "p6"} <= ids
    for a in page.all("a"):
        assert a["href"][1:] in ids  # the contents links land somewhere


def test_workload_table_numbers_are_the_records(recordset, html):
    # The best triton_fused run of decode_b1 on the H100: its time and SOL appear in the page.
    rec = max((r for r in recordset.records if (r.problem, r.workload, r.solution, r.gpu_spec, r.status) ==
               (SEED, "decode_b1", "triton_fused", "h100_sxm", "PASSED")), key=lambda r: r.sol)
    group = re.search(r'<tbody>\s*<tr>\s*<td rowspan="\d+" class="wl">decode_b1</td>.*?</tbody>',
                      html.split('id="p1"')[1], re.S).group(0)  # the workload's rows, a candidate each
    assert "T=1, H=4096" in group and "memory" in group
    row = re.search(r'<td class="sep name">triton_fused</td>.*?</tr>', group, re.S).group(0)
    assert si(rec.time_s, "s") in row and f">{rf.expected_sol(rec.sol)}<" in row
    assert f"{rec.achieved_flops_per_s / 1e12:.3g}" in row and f"{rec.achieved_bytes_per_s / 1e12:.3g}" in row
    assert f'style="width: {round(100 * rec.sol, 1)}%"' in row  # its bar, to scale


def test_environment_timing_and_failures(recordset, html):
    env = html.split('id="environment"')[1].split('id="timing"')[0]
    for expected in ("580.159.04", "2.11.0+cu130", "power_throttled", "sw_power_cap", ">SM clock, lowest<",
                     "NVIDIA H100 80GB HBM3", ">NVIDIA driver<"):
        assert expected in env
    timing = html.split('id="timing"')[1].split('id="failures"')[0]
    assert ">events<" in timing and ">L2 flush size</dt><dd>126 MB<" in timing
    failures = html.split('id="failures"')[1]
    n_failed = sum(r.status != "PASSED" for r in recordset.records if r.roof == "datasheet")
    assert f"{n_failed} result(s) did not pass" in failures
    assert failures.count("<tr><td><span class=\"badge") == n_failed
    assert "worker died: signal 11 (SIGSEGV)" in failures


def test_png_and_no_charts(recordset):
    df = records_frame(recordset.dicts())
    png = build_report(df, Selection(problem="toy.rmsnorm", gpu="h200_sxm"), charts="png", workers=1)
    srcs = [a["src"] for a in HtmlPage(png).all("img")]
    assert len(srcs) == 1 and all(s.startswith("data:image/png;base64,iVBOR") for s in srcs)
    none = build_report(df, Selection(problem="toy.rmsnorm"), charts="none")
    assert not HtmlPage(none).all("img") and "toy.rmsnorm" in none


def test_parallel_chart_drawing_gives_the_same_charts(recordset):
    df = records_frame(recordset.dicts())
    one = HtmlPage(build_report(df, Selection(gpu="h200_sxm", problem="toy.*"), workers=1)).all("svg")
    two = HtmlPage(build_report(df, Selection(gpu="h200_sxm", problem="toy.*"), workers=2)).all("svg")
    assert len(one) == len(two) == 2 + 1
    assert [a["aria-label"] for a in one] == [a["aria-label"] for a in two]


def test_measured_roof_report(recordset, tmp_path, monkeypatch):
    rf.write_measured_spec(tmp_path / "specs")
    monkeypatch.setenv("SOLBENCH_SPECS", str(tmp_path / "specs"))
    html = build_report(records_frame(recordset.dicts()), Selection(roof="measured"), charts="none")
    assert "against <strong>the measured roof</strong>" in html
    # The H100 has no measured records: no table of it, and the page says what was left out.
    assert "on h100_sxm" not in html and "Overall on h200_sxm (measured roof)" in html
    assert "h100_sxm: " in html and "record(s) against the datasheet roof not shown (one roof per GPU): pass " \
        "--roof datasheet to see them" in html


def test_write_report_and_cli(tmp_path, recordset):
    f = recordset.write(tmp_path / "results" / "r.jsonl")
    out = write_report(load_results(f), tmp_path / "out" / "report.html", Selection(problem="toy.*"), charts="none")
    assert out.is_file() and "toy.scan_fp32" in out.read_text()
    res = CliRunner().invoke(app, ["report", str(f), "-o", str(tmp_path / "cli.html"), "--gpu", "h200_sxm",
                                   "--problem", "toy.rmsnorm", "--charts", "png", "--title", "CLI"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "cli.html").read_text()
    assert "<title>CLI</title>" in text and text.count("data:image/png") == 1


def test_present_demo(tmp_path, capsys):
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, with_measured=False)
    rs.records = [r for r in rs.records if r.problem.startswith("toy.")]
    f = rs.write(tmp_path / "r.jsonl")
    paths = present_demo(f, tmp_path / "demo")
    assert set(paths) == {"roofline", "report"}
    assert paths["roofline"].read_bytes().startswith(b"\x89PNG")
    assert "<h1>solbench report</h1>" in paths["report"].read_text()
    out = capsys.readouterr().out
    assert "Overall on h200_sxm" in out and str(paths["report"]) in out
