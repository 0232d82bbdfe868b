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

from solbench.data import HardwareSpec
from solbench.errors import SolbenchError
from solbench.present.chart_style import output_format, palette_for, save
from solbench.present.frame import Selection, select_records
from solbench.present.levels_chart import levels_figure
from solbench.present.roofline_chart import roofline_figure
from solbench.present.sol_chart import sol_figure


def plot_roofline(results: pd.DataFrame, output: str | Path, selection: Selection | None = None, *,
                  title: str | None = None, specs: list[HardwareSpec] | None = None, levels: bool = False) -> Path:
    """Write the roofline chart of the selected records (one GPU) to ``output``; returns the path.
    ``levels``: the hierarchical roofline instead, each profiled kernel at HBM, L2 and L1."""
    chart_output(output)  # a bad suffix or a missing folder fails before any work
    records, left_out = select_records(results, selection)
    draw = levels_figure if levels else roofline_figure
    with palette_for(results["solution"]):  # the same colours as every other chart of these results
        return save(draw(records, title=title, specs=specs, notes=left_out), output)


def plot_sol(results: pd.DataFrame, output: str | Path, selection: Selection | None = None, *,
             title: str | None = None) -> Path:
    """Write the SOL bar chart of the selected records (one GPU) to ``output``; returns the path."""
    chart_output(output)
    records, left_out = select_records(results, selection)
    with palette_for(results["solution"]):
        return save(sol_figure(records, title=title, notes=left_out), output)


def chart_output(output: str | Path) -> None:
    """A chart file name a user gave: a known suffix, in a folder that exists (never made silently:
    a typo in a path would scatter charts into new folders)."""
    output_format(output)
    folder = Path(output).parent
    if not folder.is_dir():
        raise SolbenchError(f"{output}: no folder {folder}: create it first, or write the chart elsewhere")


__all__ = ["levels_figure", "plot_roofline", "plot_sol", "roofline_figure", "sol_figure"]
