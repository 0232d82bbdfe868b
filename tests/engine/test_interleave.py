"""`solbench run --interleave N` on the CPU: candidates run A, B, A, B per workload, each record is
tagged with its round and the cooldown before it, and the closing table shows the rounds' median."""

from __future__ import annotations

import io
import shutil
import statistics
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import record_factory as rf
from rich.console import Console

from solbench.cli._common import fmt_time
from solbench.data.record import ResultRecord
from solbench.data.results import read_records
from solbench.engine import interleave

HERE = Path(__file__).resolve().parents[1]  # tests/
ROOT = HERE.parent
TINY = HERE / "fixtures" / "tiny"
HONEST = HERE / "candidates" / "honest.py"
FAKE_WAIT_S = 0.125


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """The CLI in this process: its exit code, and what it printed on stdout and stderr."""
    from solbench.cli import main

    monkeypatch.setattr(sys, "argv", ["solbench", *args])
    monkeypatch.chdir(ROOT)
    printed = io.StringIO()
    with pytest.raises(SystemExit) as info, redirect_stdout(printed), redirect_stderr(printed):
        main()
    return info.value.code, printed.getvalue()


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("interleave")
    twin = tmp / "twin.py"
    shutil.copy(HONEST, twin)
    out = tmp / "r.jsonl"
    calls: list[float] = []

    def fake_cooldown(device: str, max_wait_s: float) -> dict:
        calls.append(max_wait_s)
        return {"waited_s": FAKE_WAIT_S, "recovered": True}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interleave, "cooldown_between", fake_cooldown)
        code, text = _main(mp, "run", str(TINY / "scaled_add"), "--workload", "n4", "--workload", "n32",
                           "--device", "cpu", "-o", str(out), "--budget", "0.05", "-q", "--interleave", "2",
                           "--cooldown", "3", "-s", str(HONEST), "-s", str(twin))
    rows, warnings = read_records([out])
    assert not warnings
    return code, text, rows, calls


def test_rounds_alternate_per_workload(interleaved):
    code, text, rows, _ = interleaved
    assert code == 0, text[-3000:]
    assert [(r["workload"], r["solution"]) for r in rows] == [
        (w, c) for w in ("n4", "n32") for _ in range(2) for c in ("honest", "twin")]
    assert all(r["status"] == "PASSED" for r in rows)
    assert len({r["run_id"] for r in rows}) == 1  # one run: one base seed, the same inputs every round


def test_each_record_is_tagged(interleaved):
    _, _, rows, calls = interleaved
    tags = [r["timing"]["interleave"] for r in rows]
    assert [t["round"] for t in tags] == [1, 1, 2, 2] * 2
    assert all(t["of"] == 2 and t["order"] == ["honest", "twin"] for t in tags)
    # A cooldown before every item but the first, with the --cooldown limit; its wait is recorded.
    assert calls == [3.0] * (len(rows) - 1)
    assert [t["cooldown_s"] for t in tags] == [0.0] + [FAKE_WAIT_S] * (len(rows) - 1)


def test_table_shows_the_median_of_the_rounds(interleaved):
    from solbench.cli.engine import interleave_tables

    _, text, rows, _ = interleaved
    assert "interleaved rounds" in text
    records = [ResultRecord.model_validate(r) for r in rows]
    console = Console(file=io.StringIO(), width=250)
    for table in interleave_tables(records):
        console.print(table)
    lines = console.file.getvalue().splitlines()
    for workload in ("n4", "n32"):
        for cand in ("honest", "twin"):
            times = [r["time_s"] for r in rows if r["workload"] == workload and r["solution"] == cand]
            median = statistics.median(times)
            spread = (max(times) - min(times)) / median
            sol = rows[0]["t_ideal_s"] / median if workload == rows[0]["workload"] else None
            (line,) = [ln for ln in lines if f" {workload} " in ln and f" {cand} " in ln]
            assert "2/2" in line and fmt_time(median) in line and f"{spread:.1%}" in line, line
            if sol is not None:
                assert f" {rf.expected_sol(sol)} " in line, line  # as the leaderboard writes a SOL


def test_bad_interleave_is_one_line(monkeypatch, tmp_path):
    code, err = _main(monkeypatch, "run", str(TINY / "scaled_add"), "--device", "cpu", "-q",
                         "-o", str(tmp_path / "r.jsonl"), "-s", str(HONEST), "--interleave", "-1")
    assert code == 2 and "--interleave -1" in err and "Traceback" not in err
    assert not (tmp_path / "r.jsonl").exists()
