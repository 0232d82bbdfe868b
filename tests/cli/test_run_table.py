"""The `run` table's SOL column reads as the leaderboard's: three significant digits, no percent, no exponent."""

from __future__ import annotations

import io

import record_factory as rf
from rich.console import Console

from solbench.data.hardware import load_spec
from solbench.data.record import Status
from solbench.data.roofline import workload_point

# The values issue 20 saw in one column (0.1%, 0.00041, 1.1e-05), and their neighbours.
SOLS = (1.1e-05, 0.00041, 0.001, 0.0013, 0.05, 0.09996, 0.812, 1.0, 1.7)


def test_run_table_sol_cells():
    from solbench.cli.engine import results_tables

    prob, spec = rf.problems()[1], load_spec("h200_sxm")
    pt = workload_point(prob, prob.workloads[0], spec)
    records = [rf.make_record(prob, pt, spec, f"cand{i}", Status.PASSED, v) for i, v in enumerate(SOLS)]
    records.append(rf.make_record(prob, pt, spec, "failed", Status.INCORRECT, None))
    console = Console(record=True, width=250, file=io.StringIO())
    for table in results_tables(records):
        console.print(table)
    lines = console.export_text().splitlines()
    for i, value in enumerate(SOLS):
        (line,) = [ln for ln in lines if f" cand{i} " in ln]
        assert f" {rf.expected_sol(value)} " in line and "%" not in line, line
    (failed,) = [ln for ln in lines if " failed " in ln]
    assert " - " in failed
