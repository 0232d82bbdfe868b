"""The report's History and Comparison sections, as plain data for the template (no markup here).

History appears when a series (problem, workload, GPU, candidate) has two runs or more; the
Comparison when the report is given a baseline (``solbench report --baseline BASE``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pandas as pd

from solbench.errors import SolbenchError
from solbench.present.chart_style import to_bytes
from solbench.present.compare import HEADERS as COMPARE_HEADERS
from solbench.present.compare import compare_frames, missing_line, row_cells, summary_line
from solbench.present.frame import Selection
from solbench.present.history import HEADERS as HISTORY_HEADERS
from solbench.present.history import History, history_figure, history_rows, result_history
from solbench.present.markup import one_line

MAX_ROWS = 500  # table rows in a section; the rest are counted


@dataclass
class TableSection:
    """A titled table with a verdict per row (for its colour), notes, and an optional chart."""

    headers: tuple[str, ...]
    rows: list[list[str]]
    verdicts: list[str]
    notes: list[str] = field(default_factory=list)
    chart: tuple[str, str] | None = None  # (data URI, alt text)
    more: int = 0


def history_section(results: pd.DataFrame, selection: Selection | None, charts: str) -> TableSection | None:
    """Series with two runs or more, each run's time and SOL, change points marked; None when no
    series has two runs."""
    try:
        h: History = result_history(results, selection, min_points=2)
    except SolbenchError:
        return None
    except ImportError as err:  # scipy missing (a bare GPU image): say so rather than lose the report
        return TableSection(HISTORY_HEADERS, [], [], [f"History not computed: {err} (pip install scipy)"])
    if not h.series:
        return None
    rows = history_rows(h)
    verdicts = [p.change.verdict if p.is_change else "" for s in h.series for p in s.points]
    notes = [f"{len(h.series)} series with two runs or more; {len(h.change_points())} change point(s): a run that "
             f"differs from the one before it (p < {h.alpha:g}, at least {h.min_effect * 100:g}%). Between runs of one "
             "record each the test sees only the noise within a run (docs/compare.md)."]
    chart = None
    if charts != "none":
        mime = "image/svg+xml" if charts == "svg" else "image/png"
        uri = f"data:{mime};base64," + base64.b64encode(to_bytes(history_figure(h), charts)).decode("ascii")
        chart = (uri, "SOL by run, change points ringed")
    return TableSection(HISTORY_HEADERS, rows[:MAX_ROWS], verdicts[:MAX_ROWS], notes, chart, max(0, len(rows) - MAX_ROWS))


def compare_section(baseline: pd.DataFrame, records: pd.DataFrame) -> TableSection:
    """The report's records against a baseline's, pair by pair (as ``solbench compare BASE NEW``)."""
    result = compare_frames(baseline, records, base_name="baseline", new_name="these results")
    rows = [row_cells(r) for r in result.rows]
    notes = [one_line(summary_line(s), 300) for s in result.summary]
    notes += [f"not compared: {one_line(missing_line(m), 300)}" for m in result.missing[:50]]
    if len(result.missing) > 50:
        notes.append(f"... and {len(result.missing) - 50} more not compared")
    return TableSection(COMPARE_HEADERS, rows[:MAX_ROWS], [r.comparison.verdict for r in result.rows][:MAX_ROWS],
                        notes, None, max(0, len(rows) - MAX_ROWS))
