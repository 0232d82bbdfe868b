"""The report in a real browser: headless Chromium loads it, renders its tables and charts, and runs
nothing from the records. Skipped only where Chromium is absent and this is not CI (CI=1 fails)."""

from __future__ import annotations

import os
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest
import record_factory as rf
from record_factory import HtmlPage

from solbench.present.frame import records_frame
from solbench.present.report import write_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# The first candidates' colours in the charts (tab10 blue, orange, red); the page's CSS uses none of them.
CHART_COLOURS = np.array([[0x1F, 0x77, 0xB4], [0xFF, 0x7F, 0x0E], [0xD6, 0x27, 0x28]]) / 255


def _browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    message = "headless Chromium not found: install it with `apt-get install -y chromium`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: this test must run)")
    pytest.skip(message)


def _run(browser: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, with_measured=False)
    rs.records = [r for r in rs.records if r.problem.startswith("toy.")]
    rs.records.append(rf.hostile_record(log="<script>document.title='pwned'</script>"))
    out = tmp_path_factory.mktemp("report") / "report.html"
    return write_report(records_frame(rs.dicts()), out, title="Browser test", workers=1)


@pytest.mark.timeout(400)
def test_chromium_renders_tables_and_runs_nothing(report_file, tmp_path):
    browser = _browser()
    dom = HtmlPage(_run(browser, tmp_path, "--dump-dom", report_file.as_uri()).stdout)
    tags = [t for t, _ in dom.tags]
    classes = [a.get("class", "") for t, a in dom.tags if t == "table"]
    assert "script" not in tags
    assert classes.count("leaderboard problem") == 2 and classes.count("workloads") == 2
    assert "leaderboard overall" in classes and "failures" in classes
    charts = [a for t, a in dom.tags if t == "svg"]
    assert len(charts) == 2 + 1 and all(a.get("class") == "chart" for a in charts)  # inline: tooltips work
    assert sum(t == "title" for t in tags) > len(charts)  # the page's title and a title per point
    text = "".join(dom.text)
    assert "<script>alert('x')</script>" in text  # the hostile name is text on the page, not an element
    assert "Browser test" in text and "pwned" not in "".join(a.get("content", "") for _, a in dom.tags)


@pytest.mark.timeout(400)
def test_chromium_screenshot_shows_the_charts(report_file, tmp_path):
    browser = _browser()
    shot = tmp_path / "report.png"
    _run(browser, tmp_path, f"--screenshot={shot}", "--window-size=1280,2200", report_file.as_uri())
    img = matplotlib.image.imread(shot)[..., :3]
    assert img.shape[:2] == (2200, 1280)
    ink = (img.mean(axis=2) < 0.9).mean()
    assert ink > 0.03, f"the page looks blank ({ink:.1%} non-white pixels)"
    chart_pixels = sum(int((np.abs(img - c).max(axis=2) < 0.06).sum()) for c in CHART_COLOURS)
    assert chart_pixels > 400, f"no chart drawn ({chart_pixels} pixels in the candidates' colours)"
