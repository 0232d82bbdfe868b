"""Rankings checked against the SOLs the record factory chose; every output format; the CLI."""

from __future__ import annotations

import io
import json
import re
import statistics
import subprocess
import sys

import pandas as pd
import pytest
import record_factory as rf
from rich.console import Console
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.record import Status
from solbench.present.frame import Selection, records_frame
from solbench.present.leaderboard import display_tables, format_leaderboard, print_leaderboard, to_csv
from solbench.present.ranking import leaderboard


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    return rf.make_recordset(repeats=3)


@pytest.fixture(scope="module")
def df(recordset) -> pd.DataFrame:
    return records_frame(recordset.dicts())


def _expected(recordset: rf.RecordSet, gpu: str, roof: str, problem: str) -> dict[str, tuple[int, float]]:
    """candidate -> (workloads passed, geomean of its best SOLs), from the factory's own numbers."""
    per: dict[str, list[float]] = {}
    for (g, r, p, cand, _w), sol in recordset.truth.items():
        if (g, r, p) == (gpu, roof, problem):
            per.setdefault(cand, []).append(sol)
    return {c: (len(v), statistics.geometric_mean(v)) for c, v in per.items()}


@pytest.mark.parametrize("gpu", ["h200_sxm", "h100_sxm"])
def test_per_problem_ranking_matches_the_chosen_sols(recordset, df, gpu):
    lb = leaderboard(df, Selection(gpu=gpu))
    assert lb.roof == "datasheet"
    for prob in ("llama3_1_8b.attn_o_proj_residual", "toy.rmsnorm", "toy.scan_fp32"):
        expected = _expected(recordset, gpu, "datasheet", prob)
        table = lb.problems[(lb.problems["problem"] == prob) & (lb.problems["gpu"] == gpu)].set_index("candidate")
        for cand, (n, gm) in expected.items():
            assert table.loc[cand, "workloads_passed"] == n
            assert table.loc[cand, "geomean_sol"] == pytest.approx(gm, rel=1e-12)
        # Ranked: not disqualified, something passed; ordered by (passed desc, geomean desc).
        rankable = {c: v for c, v in expected.items() if c != "cheater"}
        order = sorted(rankable, key=lambda c: (-rankable[c][0], -rankable[c][1]))
        ranked = table.dropna(subset=["rank"]).sort_values("rank")
        assert list(ranked.index) == order
        assert list(ranked["rank"]) == list(range(1, len(order) + 1))
        assert pd.isna(table.loc["broken", "rank"]) and table.loc["broken", "COMPILE_ERROR"] > 0


def test_a_candidate_failing_a_workload_never_outranks_one_passing_all(df):
    lb = leaderboard(df, Selection(gpu="h200_sxm", problem="toy.rmsnorm"))
    t = lb.problems.set_index("candidate")
    # cupy_raw has the higher geomean but fails its largest workload.
    assert t.loc["cupy_raw", "geomean_sol"] > t.loc["torch_eager", "geomean_sol"]
    assert t.loc["cupy_raw", "rank"] > t.loc["torch_eager", "rank"]
    assert not t.loc["cupy_raw", "complete"] and t.loc["torch_eager", "complete"]


def test_reward_hack_is_shown_and_never_ranked(df):
    lb = leaderboard(df, Selection(gpu="h200_sxm"))
    hack = lb.problems[lb.problems["candidate"] == "cheater"]
    assert hack["rank"].isna().all() and hack["disqualified"].all()
    assert (hack["REWARD_HACK"] == 1).all()
    assert hack["note"].str.startswith("REWARD_HACK").all()
    overall = lb.overall.set_index("candidate")
    assert pd.isna(overall.loc["cheater", "rank"]) and overall.loc["cheater", "disqualified"]
    # It has the highest SOL of all, and still is not first.
    assert overall["geomean_sol"].idxmax() == "cheater"
    assert overall["rank"].min() == 1 and overall.loc[overall["rank"] == 1].index[0] == "triton_fused"


def test_best_result_per_workload_is_used(recordset, df):
    lb = leaderboard(df, Selection(gpu="h200_sxm", candidate="torch_eager"))
    assert len(lb.records[lb.records["status"] == "PASSED"]) == 3 * 12  # three runs of each workload
    for (g, roof, p, c, w), sol in recordset.truth.items():
        if (g, roof, c) == ("h200_sxm", "datasheet", "torch_eager"):
            row = lb.best[(lb.best["problem"] == p) & (lb.best["workload"] == w)]
            assert float(row["sol"].iloc[0]) == pytest.approx(sol)


def test_overall_table(recordset, df):
    lb = leaderboard(df, Selection(gpu="h100_sxm"))
    t = lb.overall.set_index("candidate")
    for cand in ("torch_eager", "triton_fused", "cupy_raw", "flaky"):
        sols = [s for (g, r, _p, c, _w), s in recordset.truth.items() if (g, r, c) == ("h100_sxm", "datasheet", cand)]
        attempted = 12  # 7 + 3 + 2 workloads
        assert t.loc[cand, "workloads_attempted"] == attempted
        assert t.loc[cand, "workloads_passed"] == len(sols)
        assert t.loc[cand, "geomean_sol"] == pytest.approx(statistics.geometric_mean(sols))
        assert t.loc[cand, "share_sol_ge_0_5"] == pytest.approx(sum(s >= 0.5 for s in sols) / attempted)
        assert t.loc[cand, "share_sol_ge_0_8"] == pytest.approx(sum(s >= 0.8 for s in sols) / attempted)
    assert t.loc["torch_eager", "problems_passed"] == 3 and t.loc["cupy_raw", "problems_passed"] == 0
    assert t.loc["flaky", "RUNTIME_ERROR"] == 3 and t.loc["flaky", "TIMEOUT"] == 3
    assert t.loc["broken", "COMPILE_ERROR"] == 12
    # cupy_raw (9 passed) above flaky (6 passed) although flaky's geomean is no lower: passes come first.
    assert t.loc["cupy_raw", "rank"] < t.loc["flaky", "rank"]


def test_roofs_are_never_mixed(recordset, df):
    ds = leaderboard(df, Selection(gpu="h200_sxm"))
    me = leaderboard(df, Selection(gpu="h200_sxm", roof="measured"))
    assert set(ds.records["roof"]) == {"datasheet"} and set(me.records["roof"]) == {"measured"}
    gm = me.problems.set_index(["problem", "candidate"]).loc[("toy.rmsnorm", "torch_eager"), "geomean_sol"]
    sols = [s for (g, r, p, c, _w), s in recordset.truth.items()
            if (r, p, c) == ("measured", "toy.rmsnorm", "torch_eager")]
    assert gm == pytest.approx(statistics.geometric_mean(sols))


def test_ties_share_a_rank():
    cands = {"a": (0.5, 0.5), "b": (0.5, 0.5), "c": (0.4, 0.4)}
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates=cands, with_measured=False)
    for r in rs.records:  # exact ties: same SOL for a and b everywhere
        if r.solution == "b":
            twin = next(x for x in rs.records if x.solution == "a" and (x.problem, x.workload) == (r.problem, r.workload))
            r.sol, r.time_s = twin.sol, twin.time_s
    dicts = rs.dicts()
    # "aa" ties with a and b too, but was caught hacking: sorted between them, it must not split the tie.
    twins = [{**d, "solution": "aa"} for d in dicts if d["solution"] == "a"]
    rms = next(d for d in twins if d["problem"] == "toy.rmsnorm")
    hack = {**rms, "status": "REWARD_HACK", "time_s": None, "sol": None, "reason": "too fast"}
    lb = leaderboard(records_frame([*dicts, *twins, hack]), Selection(problem="toy.rmsnorm"))
    ranks = lb.problems.set_index("candidate")["rank"]
    assert ranks["a"] == ranks["b"] == 1 and ranks["c"] == 3 and pd.isna(ranks["aa"])


def test_sol_above_one_is_noted(df):
    d = df.copy()
    i = d.index[(d["status"] == Status.PASSED.value) & (d["solution"] == "torch_eager")][0]
    d.loc[i, "sol"] = 1.7
    lb = leaderboard(d, Selection(gpu="h200_sxm"))
    row = lb.problems[(lb.problems["candidate"] == "torch_eager") & (lb.problems["above_roof"] > 0)]
    assert len(row) == 1 and "faster than the roof" in row["note"].iloc[0]


# --- formats -------------------------------------------------------------------------------

# SOLs three decades apart in one column (a CPU-like candidate, a middling one, one near the roof).
MIXED = {"slow": (0.0005, 0.002), "mid": (0.05, 0.0123), "fast": (0.812, 1.05)}
SEED = "llama3_1_8b.attn_o_proj_residual"


def test_sol_reads_the_same_in_every_format():
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates=MIXED, with_measured=False)
    lb = leaderboard(records_frame(rs.dicts()), Selection(problem=SEED))
    sols = {c: [s for (_g, _r, p, cand, _w), s in rs.truth.items() if (p, cand) == (SEED, c)] for c in MIXED}
    want = {c: (rf.expected_sol(statistics.geometric_mean(v)), rf.expected_sol(min(v))) for c, v in sols.items()}
    (table,) = [t for t in display_tables(lb) if t.kind == "problem"]
    gm, worst = table.headers.index("Geomean SOL"), table.headers.index("Worst SOL")
    assert {row[1]: (row[gm], row[worst]) for row in table.rows} == want
    md = format_leaderboard(lb, "markdown")
    html = format_leaderboard(lb, "html")
    console = Console(record=True, width=160, file=io.StringIO())
    print_leaderboard(lb, console)
    lines = console.export_text().splitlines()
    for cand, (g, w) in want.items():
        assert re.search(rf"\| {cand} \| 7/7 \| {re.escape(g)} \| {re.escape(w)} \|", md), md
        assert f'<td class="num">{g}</td>\n<td class="num">{w}</td>' in html
        assert any(f" {g} " in ln and f" {w} " in ln for ln in lines if f" {cand} " in ln)
    assert not re.search(r"\d(e-|%)", md.split("## Overall")[0])  # no exponent, no percent SOL



@pytest.fixture(scope="module")
def hostile_lb(recordset):
    dicts = recordset.dicts() + [rf.hostile_record().model_dump(mode="json"),
                                 rf.hostile_record("=HYPERLINK(\"x\")|[bold]b[/bold]\x1b[2J").model_dump(mode="json")]
    return leaderboard(records_frame(dicts), Selection(gpu="h200_sxm"))


def test_markdown_escapes_markup_and_pipes(hostile_lb):
    md = format_leaderboard(hostile_lb, "markdown")
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "\\|[bold]" in md and "\x1b" not in md
    cells = 0
    hostile_rows = 0
    for line in md.splitlines():  # every row has as many cells as its table's header
        n = len(re.findall(r"(?<!\\)\|", line))
        if line.startswith("| Rank"):
            cells = n
        elif line.startswith("| "):
            assert n == cells, line
            hostile_rows += "=HYPERLINK" in line
    assert hostile_rows == 2


def test_csv_round_trips_and_defuses_formulas(hostile_lb):
    df = pd.read_csv(io.StringIO(to_csv(hostile_lb)))
    assert set(df["scope"]) == {"problem", "overall"}
    assert not df["candidate"].astype(str).str.startswith("=").any()
    assert df["candidate"].astype(str).str.startswith("'=HYPERLINK").any()
    row = df[(df["scope"] == "problem") & (df["problem"] == "toy.rmsnorm") & (df["candidate"] == "torch_eager")]
    t = hostile_lb.problems
    want = t[(t["problem"] == "toy.rmsnorm") & (t["candidate"] == "torch_eager")]["geomean_sol"].iloc[0]
    assert row["geomean_sol"].iloc[0] == pytest.approx(want)


def test_json_has_both_tables(hostile_lb):
    data = json.loads(format_leaderboard(hostile_lb, "json"))
    assert data["roof"] == "datasheet"
    assert {r["candidate"] for r in data["overall"]} >= {"torch_eager", "cheater"}
    assert all(r["rank"] is None for r in data["problems"] if r["candidate"] == "cheater")


def test_html_fragment_is_escaped(hostile_lb):
    html = format_leaderboard(hostile_lb, "html")
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "Content-Security-Policy" in html


def test_terminal_table_prints_record_text_literally(hostile_lb):
    console = Console(record=True, width=120, file=io.StringIO())
    print_leaderboard(hostile_lb, console)
    text = console.export_text()
    assert "[bold]b[/bold]" in text  # not interpreted as rich markup
    assert "\x1b[2J" not in text
    assert "toy.rmsnorm on h200_sxm (datasheet roof)" in text


def test_display_tables_cover_every_problem_and_gpu(df):
    lb = leaderboard(df)
    titles = [t.title for t in display_tables(lb)]
    assert sum(t.startswith("Overall") for t in titles) == 2
    assert len(titles) == 2 + 3 * 2


def test_unknown_format_is_a_clear_error(hostile_lb):
    from solbench.errors import SolbenchError

    with pytest.raises(SolbenchError, match="pick one of"):
        format_leaderboard(hostile_lb, "yaml")


# --- CLI -----------------------------------------------------------------------------------

def test_cli_leaderboard_formats_and_output(tmp_path, recordset):
    f = recordset.write(tmp_path / "r.jsonl")
    runner = CliRunner()
    res = runner.invoke(app, ["leaderboard", str(f), "--gpu", "h200_sxm", "--problem", "toy.*", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert {r["problem"] for r in json.loads(res.stdout)["problems"]} == {"toy.rmsnorm", "toy.scan_fp32"}
    out = tmp_path / "board.md"
    res = runner.invoke(app, ["leaderboard", str(f), "--tag", "scan", "-f", "markdown", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "toy.scan_fp32 on h100_sxm" in out.read_text() and "toy.rmsnorm" not in out.read_text()
    res = runner.invoke(app, ["leaderboard", str(f), "--candidate", "torch_eager"])
    assert res.exit_code == 0 and "torch_eager" in res.stdout and "cupy_raw" not in res.stdout


def test_cli_errors_are_one_line_without_traceback(tmp_path, recordset):
    f = recordset.write(tmp_path / "r.jsonl")
    for args, message in ((["leaderboard", str(tmp_path / "missing.jsonl")], "no such file or folder"),
                          (["leaderboard", str(f), "--problem", "nope"], "--problem nope matches no record")):
        res = subprocess.run([sys.executable, "-m", "solbench", *args], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120)
        assert res.returncode != 0
        assert message in res.stderr and "Traceback" not in res.stderr, res.stderr


# --- nothing dropped silently: every GPU shown, other roofs counted in every format -----------------

def _cpu(d: dict) -> dict:
    return {**d, "gpu_spec": "cpu_estimate", "roof": "estimate", "device": "AMD EPYC 9654", "solution": "my_cpu",
            "sol": 0.01, "time_s": d["t_ideal_s"] / 0.01}


@pytest.fixture(scope="module")
def mixed_lb(recordset):
    """H200 and H100 results (datasheet and measured roofs) and a user's CPU results."""
    cpu = [_cpu(d) for d in recordset.dicts() if d["status"] == "PASSED" and d["gpu_spec"] == "h200_sxm"][:3]
    return leaderboard(records_frame([*recordset.dicts(), *cpu]))


def test_cpu_results_are_ranked_in_their_own_tables(mixed_lb):
    assert mixed_lb.roofs == {"cpu_estimate": "estimate", "h100_sxm": "datasheet", "h200_sxm": "datasheet"}
    assert mixed_lb.roof == "datasheet, estimate"
    assert mixed_lb.roof_phrase == "each GPU's own roof (estimate on cpu_estimate; datasheet on h100_sxm; " \
                                   "datasheet on h200_sxm)"
    titles = [t.title for t in display_tables(mixed_lb)]
    assert "Overall on cpu_estimate (estimate roof)" in titles and "Overall on h200_sxm (datasheet roof)" in titles
    cpu = mixed_lb.overall[mixed_lb.overall["gpu"] == "cpu_estimate"]
    assert list(cpu["candidate"]) == ["my_cpu"] and cpu["rank"].iloc[0] == 1


def test_every_format_says_what_it_does_not_show(mixed_lb):
    (note,) = mixed_lb.left_out
    assert re.fullmatch(r"h200_sxm: \d+ record\(s\) against the measured roof not shown \(one roof per GPU\): "
                        r"pass --roof measured to see them", note)
    md = format_leaderboard(mixed_lb, "markdown")
    assert f"## Not shown\n\n- {note}\n" in md and "SOL against each GPU's own roof" in md
    assert json.loads(format_leaderboard(mixed_lb, "json"))["left_out"] == [note]
    html = format_leaderboard(mixed_lb, "html")
    assert "1 warning(s): records not shown or not read" in html and f"<code>{note}</code>" in html
    console = Console(record=True, width=300, file=io.StringIO())
    print_leaderboard(mixed_lb, console)
    assert f"warning: {note}" in console.export_text()
    csv = pd.read_csv(io.StringIO(to_csv(mixed_lb)))
    assert csv.groupby("gpu")["roof"].unique().map(list).to_dict() == {
        "cpu_estimate": ["estimate"], "h100_sxm": ["datasheet"], "h200_sxm": ["datasheet"]}


def test_markdown_lists_at_most_twenty_notes(mixed_lb):
    from dataclasses import replace

    lb = replace(mixed_lb, warnings=[f"r.jsonl:{i}: unreadable line skipped (x)" for i in range(30)])
    md = format_leaderboard(lb, "markdown")
    assert md.count("\n- ") == 20 + 1 and "- ... and 11 more" in md


def test_sol_1e308_is_not_ranked_and_the_table_keeps_its_width(recordset):
    dicts = [d for d in recordset.dicts() if d["gpu_spec"] == "h200_sxm" and d["problem"] == "toy.rmsnorm"]
    forged = {**next(d for d in dicts if d["status"] == "PASSED"), "solution": "forged", "sol": 1e308,
              "_source": "r.jsonl:3"}
    lb = leaderboard(records_frame([*dicts, forged]))
    assert "forged" not in set(lb.problems["candidate"])
    assert lb.warnings == ["r.jsonl:3: sol 1e+308 is impossible (above 10: no kernel runs 10 times faster than its "
                           "roof, and the physics floor rejects any time below the roof's), record left out"]
    console = Console(record=True, width=80, file=io.StringIO())
    print_leaderboard(lb, console, notes=False)
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


def _issue_records() -> list[dict]:
    """The reported case: a problem of 7 workloads; 'timeouts' passes 5 and times out on 1, 'one' passes
    the one workload it ran."""
    base = {"problem": "p.op", "gpu_spec": "h200_sxm", "roof": "datasheet", "device": "d", "flops": 10, "bytes": 10,
            "bound": "memory", "timestamp": "2026-12-01T00:00:00+00:00", "solbench_version": "0"}
    rows = []
    for i in range(7):
        status = "PASSED" if i < 5 else "TIMEOUT"
        if i < 6:
            rows.append({**base, "workload": f"w{i}", "solution": "timeouts", "status": status,
                         "time_s": 2e-6 if status == "PASSED" else None, "sol": 0.5 if status == "PASSED" else None,
                         "t_ideal_s": 1e-6})
    rows.append({**base, "workload": "w6", "solution": "one", "status": "PASSED", "time_s": 1e-5, "sol": 0.1,
                 "t_ideal_s": 1e-6})
    return rows


def test_a_candidate_with_a_failure_never_ranks_above_one_without_and_the_tables_agree():
    lb = leaderboard(records_frame(_issue_records()))
    per = {r["candidate"]: r for r in lb.problems.to_dict("records")}
    overall = {r["candidate"]: r for r in lb.overall.to_dict("records")}
    assert per["one"]["rank"] == overall["one"]["rank"] == 1  # no failure, despite fewer passes and a lower SOL
    assert per["timeouts"]["rank"] == overall["timeouts"]["rank"] == 2
    for name, passed in (("timeouts", 5), ("one", 1)):  # x of the problem's 7 in both tables
        assert (per[name]["workloads_passed"], per[name]["workloads_total"]) == (passed, 7)
        assert (overall[name]["workloads_passed"], overall[name]["workloads_attempted"]) == (passed, 7)
