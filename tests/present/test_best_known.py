"""The best-known column: the best library baseline per workload, each candidate's gap to it, in every format."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import record_factory as rf

from solbench.present.frame import Selection, records_frame
from solbench.present.leaderboard import display_tables, format_leaderboard
from solbench.present.ranking import leaderboard

CANDIDATES = {"torch_eager": (0.55, 0.62), "triton_fused": (0.81, 0.86), "lib_torch_sdpa_flash": (0.70, 0.75),
              "liger_rmsnorm": (0.60, 0.90)}  # an old-style name: a baseline without the record field
PROBLEM = "toy.rmsnorm"


@pytest.fixture(scope="module")
def recordset() -> rf.RecordSet:
    out = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates=CANDIDATES, with_measured=False, repeats=2)
    for i, r in enumerate(out.records):
        if r.solution == "lib_torch_sdpa_flash":
            out.records[i] = type(r).model_validate({**r.model_dump(), "baseline": {"library": "torch", "version": "2.11.0"}})
    return out


@pytest.fixture(scope="module")
def lb(recordset):
    return leaderboard(records_frame(recordset.dicts()), Selection(gpu="h200_sxm"))


def _truth(recordset, cand: str) -> dict[str, float]:
    return {w: s for (g, _roof, p, c, w), s in recordset.truth.items() if (g, p, c) == ("h200_sxm", PROBLEM, cand)}


def test_gap_is_the_geomean_of_sol_over_the_best_baseline_per_workload(recordset, lb):
    baselines = [_truth(recordset, "lib_torch_sdpa_flash"), _truth(recordset, "liger_rmsnorm")]
    workloads = sorted(baselines[0])
    best = {w: max(b[w] for b in baselines) for w in workloads}
    table = lb.problems[lb.problems["problem"] == PROBLEM].set_index("candidate")
    for cand in CANDIDATES:
        mine = _truth(recordset, cand)
        expected = statistics.geometric_mean([mine[w] / best[w] for w in workloads])
        assert math.isclose(table.loc[cand, "gap_to_best_known"], expected, rel_tol=1e-9), cand
        assert math.isclose(table.loc[cand, "best_known_sol"], statistics.geometric_mean(best.values()), rel_tol=1e-9)
    assert table.loc["lib_torch_sdpa_flash", "baseline"] == "torch 2.11.0"
    assert table.loc["liger_rmsnorm", "baseline"] == "library"
    assert table.loc["triton_fused", "baseline"] == ""


def test_text_formats_show_the_column_and_mark_baselines(lb):
    tables = [t for t in display_tables(lb) if t.kind == "problem" and t.problem == PROBLEM]
    (t,) = tables
    assert "Best known" in t.headers and "Gap" in t.headers
    notes = {row[1]: row[-1] for row in t.rows}
    assert notes["lib_torch_sdpa_flash"].startswith("baseline (torch 2.11.0)")
    assert not notes["triton_fused"].startswith("baseline")
    md = format_leaderboard(lb, "markdown")
    assert "| Best known | Gap |" in md
    rows = json.loads(format_leaderboard(lb, "json"))
    assert any("gap_to_best_known" in r for r in rows["problems"])


def test_no_baseline_no_column():
    rs = rf.make_recordset(gpus={"h200_sxm": "NVIDIA H200"}, candidates={"torch_eager": (0.5, 0.5)},
                           with_measured=False)
    lb = leaderboard(records_frame(rs.dicts()), Selection(gpu="h200_sxm"))
    assert all("Best known" not in t.headers for t in display_tables(lb))
    assert lb.problems["gap_to_best_known"].isna().all()
