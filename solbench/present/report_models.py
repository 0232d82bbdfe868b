"""The report's model sections: per model family and GPU, the layer's ops measured against the roll-up."""

from __future__ import annotations

import pandas as pd

from solbench.errors import SolbenchError
from solbench.present.chart_style import data_uri
from solbench.present.model_chart import model_figure
from solbench.present.model_view import ModelView, report_views
from solbench.units import si, sol_text


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.1%}"


def _rows(view: ModelView) -> list[list[str]]:
    rows = [[r.op, str(r.runs_per_layer), si(r.t_ideal_s, "s"), si(r.t_measured_s, "s"), sol_text(r.sol),
             _pct(r.ideal_share), _pct(r.measured_share), si(r.time_lost_s, "s"),
             r.candidate if isinstance(r.candidate, str) else "missing"] for r in view.ops.itertuples(index=False)]
    lay = view.layer
    lost = lay["t_measured_s"] - lay["t_ideal_s"] if lay["t_measured_s"] else None
    rows.append(["layer", "", si(lay["t_ideal_s"], "s"), si(lay["t_measured_s"], "s"), sol_text(lay["sol"]),
                 "100%", "100%" if lost is not None else "-", si(lost, "s"), ""])
    return rows


def _summary(view: ModelView) -> str:
    lay, e2e = view.layer, view.end_to_end
    text = f"MFU {_pct(lay['mfu'])} of the {lay['compute_dtype']} peak (every op at its roofline: {_pct(lay['ideal_mfu'])})"
    if e2e and e2e["t_measured_s"] is not None and e2e["gap_s"] is not None:
        text += (f"; the whole layer as one problem ({e2e['candidate']}) takes {si(e2e['t_measured_s'], 's')} against "
                 f"{si(e2e['ops_sum_s'], 's')} for its ops one by one ({e2e['gap_ratio']:+.1%})")
    return text


def model_sections(records: pd.DataFrame, charts: str) -> list[dict]:
    """One section per (family, GPU): a table per scenario, the missing ops, one chart of all scenarios."""
    try:
        views = report_views(records)
    except SolbenchError:
        return []  # a library the records do not come from: no model view to show
    groups: dict[tuple[str, str], list[ModelView]] = {}
    for v in views:
        groups.setdefault((v.model, v.spec.id), []).append(v)
    sections = []
    for (fam, gpu), vs in groups.items():
        chart = None
        if charts != "none":
            chart = data_uri(model_figure(vs), charts)
        sections.append({"title": f"{fam} on {gpu}", "anchor": f"model-{fam}-{gpu}", "chart": chart,
                         "scenarios": [{"name": v.scenario.name, "rows": _rows(v), "summary": _summary(v),
                                        "missing": v.missing} for v in vs]})
    return sections
