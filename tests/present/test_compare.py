"""`solbench compare` and `solbench history` on records with timing samples of known shifts."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from record_factory import ROOT, make_record, problems
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.hardware import load_spec
from solbench.data.record import Status
from solbench.data.roofline import workload_point
from solbench.present.compare import compare_frames
from solbench.present.frame import load_results
from solbench.present.history import HEADERS as HISTORY_HEADERS
from solbench.present.history import history_figure, result_history

SPEC = load_spec("h200_sxm")
PROBLEM = problems()[1]  # toy.rmsnorm: workloads t1, t128, t4096


def records(shifts, seed, run, ts, cand="triton", commit=None, noise=0.01, **extra):
    """One PASSED record per workload of PROBLEM, samples at (1 + shift) x a base time, 1% noise."""
    rng = np.random.default_rng(seed)
    out = []
    for wl, shift in zip(PROBLEM.workloads, shifts, strict=True):
        pt = workload_point(PROBLEM, wl, SPEC)
        s = list(max(pt.t_ideal_s / 0.6, 3e-6) * (1 + shift) * np.exp(rng.normal(0, noise, 200)))
        med = float(np.median(s))
        git = {"git": {"commit": commit, "dirty": False}} if commit else {}
        out.append(make_record(PROBLEM, pt, SPEC, cand, Status.PASSED, pt.t_ideal_s / med, run_id=run, timestamp=ts,
                               timing={"method": "events", "samples_s": s, "median_s": med, "ci95_rel": 0.002,
                                       **extra}, **git))
    return out


def write(path, recs):
    path.write_text("".join(r.to_json_line() for r in recs), encoding="utf-8")
    return path


@pytest.fixture()
def pair(tmp_path):
    base = write(tmp_path / "base.jsonl", records([0, 0, 0], 1, "r1", "2026-11-29T10:00:00+00:00", commit="a" * 40))
    new = records([0.10, 0.002, -0.10], 2, "r2", "2026-11-30T10:00:00+00:00", commit="b" * 40)
    pt = workload_point(PROBLEM, PROBLEM.workloads[0], SPEC)
    new.append(make_record(PROBLEM, pt, SPEC, "other", Status.INCORRECT, None))
    return base, write(tmp_path / "new.jsonl", new)


def solbench(*args):
    """The command as a user runs it (a process: the one-line error and exit 2 are main()'s)."""
    return subprocess.run([sys.executable, "-m", "solbench", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args) -> Ran:
    """The command in this process (fast): exit code, stdout and stderr."""
    res = CliRunner().invoke(app, [str(a) for a in args], terminal_width=200)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Ran(res.exit_code, res.stdout, res.stderr)


def test_verdicts_per_pair_and_missing(pair):
    result = compare_frames(load_results(pair[0]), load_results(pair[1]))
    got = {r.workload: r.comparison.verdict for r in result.rows}
    assert got == {"t1": "slower", "t128": "same", "t4096": "faster"}
    ratios = {r.workload: r.comparison.ratio for r in result.rows}
    assert ratios["t1"] == pytest.approx(1.10, rel=0.01) and ratios["t4096"] == pytest.approx(0.90, rel=0.01)
    assert [(m["candidate"], m["reason"]) for m in result.missing] == [("other", "no record in BASE")]
    (s,) = result.summary
    assert s["geomean_ratio"] == pytest.approx(np.exp(np.mean(np.log(list(ratios.values())))))
    assert (s["slower"], s["faster"], s["same"]) == (1, 1, 1)
    assert [r.workload for r in result.slower_than(5)] == ["t1"]


def test_cli_json_and_gate(pair):
    r = cli("compare", *pair, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    for row in rows:
        assert {"problem", "workload", "candidate", "ratio", "ci_low", "ci_high", "p_value", "verdict"} <= set(row)
        assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    gate = cli("compare", *pair, "--fail-on-slower", "5")
    assert gate.returncode == 1 and "t1" in gate.stderr and "t4096" not in gate.stderr
    assert cli("compare", *pair, "--fail-on-slower", "15").returncode == 0
    assert cli("compare", *pair, "--fail-on-missing").returncode == 0  # "other" is new in NEW: no regression
    swapped = cli("compare", pair[1], pair[0], "--fail-on-missing")  # BASE's "other" has no PASSED NEW
    assert swapped.returncode == 1 and "other" in swapped.stderr
    md = cli("compare", *pair, "--markdown")
    assert md.returncode == 0 and "| toy.rmsnorm | t1 |" in md.stdout


def test_cli_mistakes_are_one_line(pair, tmp_path):
    r = solbench("compare", tmp_path / "nope.jsonl", pair[1])
    assert r.returncode == 2 and "--by candidate" in r.stderr and "Traceback" not in r.stderr
    r = solbench("compare", "a", "b", "--by", "candidate", "--results", pair[0])
    assert r.returncode == 2 and "has no record here" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_by_candidate_pairs_interleaved_rounds(tmp_path):
    # Two candidates, 4 interleaved rounds each; round drift +-10% shared by both; B 5% slower.
    recs = []
    for i, drift in enumerate([0.1, -0.1, 0.05, -0.05]):
        inter = {"interleave": {"round": i + 1, "of": 4, "order": ["a", "b"], "cooldown_s": 0.0}}
        ts = f"2026-11-29T10:0{i}:00+00:00"
        recs += records([drift] * 3, 10 + i, "run-x", ts, cand="a", noise=0.003, **inter)
        recs += records([(1 + drift) * 1.05 - 1] * 3, 20 + i, "run-x", ts, cand="b", noise=0.003, **inter)
    path = write(tmp_path / "inter.jsonl", recs)
    result = compare_frames(*(load_results(path),) * 2, by="candidate", base_name="a", new_name="b")
    assert {r.comparison.method for r in result.rows} == {"rounds, paired t"}
    assert {r.comparison.verdict for r in result.rows} == {"slower"}
    r = cli("compare", "a", "b", "--by", "candidate", "--results", path, "--json")
    assert r.returncode == 0 and {x["candidate"] for x in json.loads(r.stdout)["rows"]} == {"b"}


def test_history_marks_change_points_and_commits(pair, tmp_path):
    third = write(tmp_path / "third.jsonl", records([0.10, 0.0, -0.10], 3, "r3", "2026-12-01T10:00:00+00:00",
                                                    commit="c" * 40))
    h = result_history(load_results([pair[0], pair[1], third]))
    series = {s.workload: s for s in h.series}
    t1 = series["t1"].points
    assert [p.label for p in t1] == ["a" * 8, "b" * 8, "c" * 8]
    assert [p.change.verdict if p.change else None for p in t1] == [None, "slower", "same"]
    assert [p.is_change for p in series["t4096"].points] == [False, True, False]
    assert history_figure(h).axes  # draws
    out = tmp_path / "trend.svg"
    r = cli("history", pair[0], pair[1], third, "--format", "json", "-o", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout.split("chart:")[0])
    assert len(data["series"]) == 3 and out.stat().st_size > 1000


def test_report_has_history_and_comparison(pair, tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", pair[1], pair[0], "--baseline", pair[0], "-o", out, "--charts", "none")
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert 'id="history"' in html and 'id="comparison"' in html and "▼ slower" in html


def test_runs_on_different_gpus_or_roofs_are_refused_in_one_line(pair, tmp_path):
    """Two calibrations of a CPU (or two GPUs) share no pair: one clear error, not an empty table and 0."""
    from solbench.present.compare import CompareError

    other = [r.model_copy(update={"gpu_spec": "cpu_host_20261201t000000", "roof": "measured"})
             for r in records([0, 0, 0], 3, "r3", "2026-12-01T10:00:00+00:00")]
    moved = write(tmp_path / "other.jsonl", other)
    with pytest.raises(CompareError, match="no pair shares a GPU and roof") as err:
        cli("compare", pair[0], moved)
    assert "h200_sxm" in str(err.value) and "cpu_host_20261201t000000" in str(err.value)
    assert "\n" not in str(err.value)


def test_history_without_git_leaves_the_commit_column_empty_and_dates_are_iso(tmp_path):
    from solbench.present.history import history_rows

    runs = [write(tmp_path / f"r{i}.jsonl", records([0, 0, 0], i, f"r{i}", f"2026-12-0{i}T10:00:00+00:00"))
            for i in (1, 2)]
    rows = history_rows(result_history(load_results(runs)))
    when, commit = HISTORY_HEADERS.index("when"), HISTORY_HEADERS.index("commit")
    assert {r[commit] for r in rows} == {"-"}  # no git: never a date in the commit column
    assert sorted({r[when] for r in rows}) == ["2026-12-01 10:00", "2026-12-02 10:00"]
