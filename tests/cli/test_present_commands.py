"""leaderboard, plot and report on hostile and mixed result files: warnings, exit codes, no traceback.

Every line skipped and every group of records not shown is one ``warning: ...`` line on stderr (ten at
most, then a count); the tables carry no control character; errors are one line and exit 2.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import record_factory as rf
from typer.testing import CliRunner

from solbench.cli import app
from solbench.cli._common import MAX_WARNINGS_SHOWN

ROOT = Path(__file__).resolve().parents[2]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def solbench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solbench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180)


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    return rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"})


def _cpu(d: dict) -> dict:
    return {**d, "gpu_spec": "cpu_estimate", "roof": "estimate", "device": "AMD EPYC 9654", "solution": "my_cpu",
            "sol": 0.01, "time_s": d["t_ideal_s"] / 0.01, "timing": {**d["timing"], "median_s": d["t_ideal_s"] / 0.01}}


HOSTILE_LINES = [
    "[" * 100_000 + "]" * 100_000,
    '{"problem": "p", "status": "PASSED", "flops": ' + "1" * 5001 + "}",
]


def _hostile_file(path: Path, recordset: rf.RecordSet) -> tuple[Path, int]:
    """Valid records, then each hostile case of issue 14 once; returns the file and its hostile line count."""
    good = recordset.dicts()
    passed = next(d for d in good if d["status"] == "PASSED")
    wrong = [{**passed, "problem": ["a", "b"]}, {**passed, "flops": "lots"}, {**passed, "tags": {"a": 1}},
             {**passed, "environment": "x"}, {**passed, "sol": 1e308, "run_id": "forged"},
             {**passed, "solution": "esc\x1b[2J\x1b]0;t\x07\x9b1m", "run_id": "esc"}]
    lines = [json.dumps(d) for d in good] + HOSTILE_LINES + [json.dumps(d) for d in wrong]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path, len(HOSTILE_LINES) + len(wrong) - 1  # the escape-laden record is valid: kept, cleaned


def test_hostile_lines_are_one_warning_each_and_the_rest_is_shown(tmp_path, recordset):
    f, n_bad = _hostile_file(tmp_path / "results" / "r.jsonl", recordset)
    r = solbench("leaderboard", str(f), "--candidate", "esc*", "--candidate", "torch_eager")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    n_good = len(recordset.records)
    warnings = r.stderr.splitlines()
    assert [w.split(": ", 2)[1] for w in warnings[:n_bad]] == [f"{f}:{i}" for i in range(n_good + 1, n_good + 1 + n_bad)]
    assert warnings[:n_bad] == [
        f"warning: {f}:{n_good + 1}: not a valid record: nested more than 32 levels deep, line skipped",
        f"warning: {f}:{n_good + 2}: unreadable line skipped (an integer of 5001 digits, beyond 64 bits)",
        f"warning: {f}:{n_good + 3}: not a valid record: problem: Input should be a valid string, line skipped",
        f"warning: {f}:{n_good + 4}: not a valid record: flops: Input should be a valid integer, unable to parse "
        "string as an integer, line skipped",
        f"warning: {f}:{n_good + 5}: not a valid record: tags: Input should be a valid list, line skipped",
        f"warning: {f}:{n_good + 6}: not a valid record: environment: Input should be a valid dictionary, line skipped",
        f"warning: {f}:{n_good + 7}: sol 1e+308 is impossible (above 10: no kernel runs 10 times faster than its "
        "roof, and the physics floor rejects any time below the roof's), record left out",
    ]
    assert "esc\ufffd[2J\ufffd]0;t\ufffd\ufffd1m" in r.stdout  # kept, shown, defused
    assert not CONTROL.search(r.stdout + r.stderr)
    assert "1e+308" not in r.stdout and "forged" not in r.stdout


def test_warnings_are_capped_with_a_count(tmp_path, recordset):
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in recordset.dicts()) + "not json\n" * 25)
    res = CliRunner().invoke(app, ["leaderboard", str(f), "-f", "json"])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == MAX_WARNINGS_SHOWN + 2  # ten lines, the count, the measured roof left out
    assert lines[MAX_WARNINGS_SHOWN] == "... and 15 more warnings"
    assert all(line.startswith("warning: ") for line in lines[:MAX_WARNINGS_SHOWN])
    assert len(json.loads(res.stdout)["warnings"]) == 25  # the file output keeps them all


def test_cpu_results_appear_by_default_and_other_roofs_are_named(tmp_path, recordset):
    dicts = recordset.dicts()
    one_each = {(d["problem"], d["workload"]): d for d in dicts if d["status"] == "PASSED" and d["roof"] == "datasheet"}
    cpu = [_cpu(d) for d in list(one_each.values())[:3]]
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in [*dicts, *cpu]))
    n_measured = sum(d["roof"] == "measured" for d in dicts)
    res = CliRunner().invoke(app, ["leaderboard", str(f)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Overall on cpu_estimate (estimate roof)" in res.stdout and "my_cpu" in res.stdout
    assert "Overall on h200_sxm (datasheet roof)" in res.stdout
    assert res.stderr.splitlines() == [f"warning: h200_sxm: {n_measured} record(s) against the measured roof not "
                                       "shown (one roof per GPU): pass --roof measured to see them"]
    res = CliRunner().invoke(app, ["leaderboard", str(f), "--roof", "measured"], terminal_width=200)
    assert res.exit_code == 0 and "Overall on h200_sxm (measured roof)" in res.stdout
    assert "warning: cpu_estimate: 3 record(s) against the estimate roof not shown (one roof per GPU): pass " \
           "--roof estimate to see them" in res.stderr.splitlines()


@pytest.mark.parametrize("command", [["leaderboard"], ["report"], ["plot", "roofline"], ["plot", "sol"]])
def test_roof_help_lists_every_roof(command):
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    (line,) = [ln for ln in res.stdout.splitlines() if "--roof" in ln]
    assert all(roof in line for roof in ("datasheet", "measured", "estimate")), line


@pytest.mark.parametrize("command", [["report", "--charts", "none"], ["plot", "sol"]])
def test_report_and_charts_name_what_they_leave_out(tmp_path, recordset, command):
    f = recordset.write(tmp_path / "r.jsonl")
    out = tmp_path / ("report.html" if command[0] == "report" else "sol.png")
    res = CliRunner().invoke(app, [*command, str(f), "-o", str(out), "--problem", "toy.rmsnorm"])
    assert res.exit_code == 0, res.output
    assert re.fullmatch(r"warning: h200_sxm: \d+ record\(s\) against the measured roof not shown \(one roof per "
                        r"GPU\): pass --roof measured to see them", res.stderr.strip())
    if command[0] == "report":
        assert "record(s) against the measured roof not shown" in out.read_text()


def test_an_error_naming_record_text_is_one_clean_line(tmp_path, recordset):
    d = {**recordset.dicts()[0], "problem": "evil\x1b]0;pwned\x07.x"}
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(d) + "\n")
    r = solbench("leaderboard", str(f), "--problem", "nope")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --problem nope matches no record (these results have: evil")
    assert len(r.stderr.splitlines()) == 1 and not CONTROL.search(r.stderr)


def test_committed_results_read_without_a_warning():
    r = solbench("leaderboard", "results/h200")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "Overall on h200_sxm (datasheet roof)" in r.stdout
