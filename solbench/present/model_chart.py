"""The model chart: per scenario, the layer's ideal and measured time as two bars stacked by op.

Each op keeps one colour in every panel, so the eye follows an op from its ideal slice to its
measured one; the gap between the bars' ends is the time the layer loses to its roofline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib as mpl
from matplotlib.figure import Figure

from solbench.present.chart_style import RC, label
from solbench.units import si, sol_text

if TYPE_CHECKING:
    from solbench.present.model_view import ModelView

BAR_ROWS = ("ideal", "measured")


def _op_colours(views: Sequence[ModelView]) -> dict[str, str]:
    ops = sorted({op for v in views for op in v.ops["op"]})
    cmap = mpl.colormaps["tab10" if len(ops) <= 10 else "tab20"]
    return {op: mpl.colors.to_hex(cmap(i % cmap.N)) for i, op in enumerate(ops)}


def _panel(ax, view: ModelView, colours: dict[str, str]) -> None:
    """Two stacked bars (ideal, measured) in the view's data-flow order, times in microseconds."""
    ops = view.ops.sort_values("op")
    for row, column in enumerate(("t_ideal_s", "t_measured_s")):
        left = 0.0
        for op, t in zip(ops["op"], ops[column], strict=True):
            if t != t:  # missing record: no slice
                continue
            ax.barh(row, t * 1e6, left=left, color=colours[op], edgecolor="white", linewidth=0.5,
                    label=label(op) if row == 0 else None)
            left += t * 1e6
    ax.set_yticks(range(len(BAR_ROWS)), BAR_ROWS)
    ax.invert_yaxis()
    ax.set_xlabel("time per layer (µs)")
    lay = view.layer
    state = (f"measured {si(lay['t_measured_s'], 's')}, SOL {sol_text(lay['sol'])}, MFU {lay['mfu']:.1%}"
             if lay["t_measured_s"] else f"{len(view.missing)} op(s) without a record")
    ax.set_title(label(f"{view.model} {view.scenario.name} on {view.spec.id}: ideal {si(lay['t_ideal_s'], 's')}, "
                       f"{state}", 140), loc="left", fontsize=10)


def model_figure(views: Sequence[ModelView]) -> Figure:
    """One panel per view (scenario), its own time axis; one legend of ops."""
    with mpl.rc_context(RC):
        fig = Figure(figsize=(9.5, 1.2 + 1.7 * len(views)))
        axes = fig.subplots(len(views), 1, squeeze=False)[:, 0]
        colours = _op_colours(views)
        for ax, view in zip(axes, views, strict=True):
            _panel(ax, view, colours)
        handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(5, len(handles)),
                   bbox_to_anchor=(0.5, -0.02), frameon=False, fontsize=8)
        fig.subplots_adjust(hspace=0.9, bottom=0.1 + 0.05 * (len(handles) // 5 + 1))
    return fig
