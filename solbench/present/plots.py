"""Charts of result records: the roofline and SOL bars, written as PNG, SVG or PDF by file suffix.

``plot_roofline`` / ``plot_sol`` take records (a DataFrame from :func:`solbench.load_results`, or
paths), the same filters as the leaderboard, and an output path. ``roofline_figure`` /
``sol_figure`` return the matplotlib Figure for further use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from solbench.data.hardware import HardwareSpec
from solbench.present.chart_style import output_format, save
from solbench.present.frame import load_results, select
from solbench.present.roofline_chart import roofline_figure
from solbench.present.sol_chart import sol_figure

Results = pd.DataFrame | str | Path | Iterable[str | Path]
Filter = Sequence[str] | str | None


def _selected(results: Results, problem: Filter, gpu: Filter, tag: Filter, candidate: Filter,
              roof: str | None) -> pd.DataFrame:
    df = results if isinstance(results, pd.DataFrame) else load_results(results, warn=False)
    return select(df, problem=problem, gpu=gpu, tag=tag, candidate=candidate, roof=roof)


def plot_roofline(results: Results, output: str | Path, *, problem: Filter = None, gpu: Filter = None,
                  tag: Filter = None, candidate: Filter = None, roof: str | None = None, title: str | None = None,
                  specs: list[HardwareSpec] | None = None) -> Path:
    """Write the roofline chart of the selected records (one GPU) to ``output``; returns the path."""
    output_format(output)  # a bad suffix fails before any work
    fig = roofline_figure(_selected(results, problem, gpu, tag, candidate, roof), title=title, specs=specs)
    return save(fig, output)


def plot_sol(results: Results, output: str | Path, *, problem: Filter = None, gpu: Filter = None,
             tag: Filter = None, candidate: Filter = None, roof: str | None = None, title: str | None = None) -> Path:
    """Write the SOL bar chart of the selected records (one GPU) to ``output``; returns the path."""
    output_format(output)
    fig = sol_figure(_selected(results, problem, gpu, tag, candidate, roof), title=title)
    return save(fig, output)


__all__ = ["plot_roofline", "plot_sol", "roofline_figure", "sol_figure"]
