"""Attainable SOL = max(T_ideal, launch floor) / T beside SOL in the leaderboard and report, SOL unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from record_factory import make_record, problems

from solbench.data.hardware import load_spec
from solbench.data.record import Status
from solbench.data.roofline import workload_point
from solbench.present.frame import records_frame
from solbench.present.leaderboard import ATTAINABLE, display_tables, to_markdown
from solbench.present.ranking import leaderboard
from solbench.present.report import build_report

FLOOR = 2e-6


@pytest.fixture(scope="module")
def board():
    spec, prob = load_spec("h200_sxm"), problems()[1]  # toy.rmsnorm: t1 is far under a 2 us floor
    recs, expected = [], []
    for wl in prob.workloads:
        pt = workload_point(prob, wl, spec)
        t = max(pt.t_ideal_s, FLOOR) / 0.5 if wl.name == "t1" else pt.t_ideal_s / 0.5
        recs.append(make_record(prob, pt, spec, "k", Status.PASSED, pt.t_ideal_s / t, t_floor_s=FLOOR,
                                t_floor_basis="test"))
        expected.append((pt.t_ideal_s / t, max(pt.t_ideal_s, FLOOR) / t))
    return leaderboard(records_frame([r.model_dump(mode="json") for r in recs])), expected


def test_geomean_attainable_beside_sol(board):
    lb, expected = board
    sol, att = zip(*expected, strict=True)
    row = lb.problems.iloc[0]
    assert row["geomean_sol"] == pytest.approx(np.exp(np.mean(np.log(sol))))
    assert row["geomean_attainable_sol"] == pytest.approx(np.exp(np.mean(np.log(att))))
    assert lb.under_floor == sum(a > s for s, a in expected) >= 1 and att[0] == pytest.approx(0.5)
    t = display_tables(lb)[0]
    i = t.headers.index(ATTAINABLE)
    assert t.headers[i - 1] == "Geomean SOL" and float(t.rows[0][i]) == pytest.approx(row["geomean_attainable_sol"],
                                                                                      rel=1e-2)
    assert "launch floor" in to_markdown(lb)


def test_no_column_without_a_floor_under_t_ideal(board):
    lb, _ = board
    records = lb.records.assign(t_floor_s=np.nan, attainable_sol=np.nan)
    assert ATTAINABLE not in display_tables(leaderboard(records))[0].headers


def test_report_shows_attainable(board):
    lb, _ = board
    html = build_report(lb.records, charts="none")
    assert "att. 0.500" in html and "launch floor" in html
