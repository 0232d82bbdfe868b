"""Charts of result records: the roofline and SOL bars, written as PNG, SVG or PDF by file suffix.

``plot_roofline`` / ``plot_sol`` take records (a DataFrame from :func:`solbench.load_results`), a
:class:`~solbench.present.frame.Selection` (one GPU, as the leaderboard's) and an output path.
``roofline_figure`` / ``sol_figure`` return the matplotlib Figure of already-selected records.
Records the selection matched on another roof of the GPU are not drawn; the footnote says how many
and which ``--roof`` shows them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from solbench.data.hardware import HardwareSpec
from solbench.present.chart_style import output_format, save
from solbench.present.frame import Selection, select_records
from solbench.present.roofline_chart import roofline_figure
from solbench.present.sol_chart import sol_figure


def plot_roofline(results: pd.DataFrame, output: str | Path, selection: Selection | None = None, *,
                  title: str | None = None, specs: list[HardwareSpec] | None = None) -> Path:
    """Write the roofline chart of the selected records (one GPU) to ``output``; returns the path."""
    output_format(output)  # a bad suffix fails before any work
    records, left_out = select_records(results, selection)
    return save(roofline_figure(records, title=title, specs=specs, notes=left_out), output)


def plot_sol(results: pd.DataFrame, output: str | Path, selection: Selection | None = None, *,
             title: str | None = None) -> Path:
    """Write the SOL bar chart of the selected records (one GPU) to ``output``; returns the path."""
    output_format(output)
    records, left_out = select_records(results, selection)
    return save(sol_figure(records, title=title, notes=left_out), output)


__all__ = ["plot_roofline", "plot_sol", "roofline_figure", "sol_figure"]
