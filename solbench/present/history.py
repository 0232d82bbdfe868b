"""`solbench history`: a candidate's time and SOL run after run, commit after commit, change points marked.

A *series* is one (problem, workload, GPU, candidate); a *point* is one run of it (the records of
one ``run_id``, or one timestamp for records without one), placed at its earliest timestamp and
labelled with the candidate's git commit (``*`` when the repository was dirty) and the solbench
version. A point is a *change point* when it differs from the point before it by the test of
``solbench compare`` (:mod:`solbench.present.significance`): significant and at least
``min_effect`` away. Between two runs of one record each, that test sees only the noise within a
run, not the drift between runs: raise ``min_effect`` to the drift the GPU shows, or run with
``--interleave`` so each point has rounds (docs/compare.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from solbench.errors import SolbenchError
from solbench.present.chart_style import RC, candidate_styles, label
from solbench.present.frame import Selection, select_records
from solbench.present.markup import markdown_cell, one_line
from solbench.present.significance import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, Comparison, clean_samples, compare_samples
from solbench.units import si, sol_text

SAMPLES = "timing.samples_s"
MAX_PANELS = 12  # (problem, GPU) panels in one chart; the rest are counted in the title
LOG_SPAN = 20.0  # a panel whose SOLs span more than this factor gets a logarithmic axis


@dataclass
class Point:
    run: str
    when: pd.Timestamp | None
    commit: str | None
    dirty: bool | None
    version: str | None
    time_s: float
    sol: float | None
    ci_rel: float | None
    rounds: list[list[float]]
    change: Comparison | None = None

    @property
    def label(self) -> str:
        """The short commit (``*``: dirty), else the date."""
        if self.commit:
            return self.commit[:8] + ("*" if self.dirty else "")
        return self.when.strftime("%m-%d %H:%M") if self.when is not None else one_line(self.run, 12)

    @property
    def commit_text(self) -> str:
        """The short commit (``*``: dirty), or ``-`` when the run was not in a git checkout (the date has
        its own column)."""
        return self.commit[:8] + ("*" if self.dirty else "") if self.commit else "-"

    @property
    def is_change(self) -> bool:
        return self.change is not None and self.change.verdict != "same"


@dataclass
class Series:
    problem: str
    workload: str
    gpu: str
    candidate: str
    points: list[Point]


@dataclass
class History:
    series: list[Series]
    roofs: dict[str, str]
    min_effect: float
    alpha: float
    warnings: list[str] = field(default_factory=list)

    def change_points(self) -> list[tuple[Series, Point]]:
        return [(s, p) for s in self.series for p in s.points if p.is_change]

    def to_dict(self) -> dict[str, Any]:
        return {"min_effect": self.min_effect, "alpha": self.alpha, "roofs": self.roofs, "warnings": self.warnings,
                "series": [{"problem": s.problem, "workload": s.workload, "gpu": s.gpu, "candidate": s.candidate,
                            "points": [_point_dict(p) for p in s.points]} for s in self.series]}


def _point_dict(p: Point) -> dict[str, Any]:
    return {"run": p.run, "when": p.when.isoformat() if p.when is not None else None, "commit": p.commit,
            "dirty": p.dirty, "solbench_version": p.version, "time_s": p.time_s, "sol": p.sol,
            "ci95_rel": p.ci_rel, "records": len(p.rounds) or None,
            "change": None if p.change is None else {**p.change.as_dict()}}


def _first(values: pd.Series) -> Any:
    v = values.dropna()
    return v.iloc[0] if len(v) else None


def _number(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _point(run: str, g: pd.DataFrame) -> Point:
    rounds = [list(s) for s in (clean_samples(x) for x in g.get(SAMPLES, pd.Series(dtype=object))) if s.size]
    pooled = [x for r in rounds for x in r]
    time_s = float(np.median(pooled)) if pooled else float(g["time_s"].median())
    t_ideal = _number(g["t_ideal_s"].median())
    dirty = _first(g["git.dirty"]) if "git.dirty" in g.columns else None
    when = g["timestamp_utc"].min()
    return Point(run=run, when=None if pd.isna(when) else when,
                 commit=_first(g["git.commit"]) if "git.commit" in g.columns else None,
                 dirty=bool(dirty) if dirty is not None else None, version=_first(g["solbench_version"]),
                 time_s=time_s, sol=t_ideal / time_s if t_ideal and time_s > 0 else None,
                 ci_rel=_number(g["timing.ci95_rel"].median()) if "timing.ci95_rel" in g.columns else None,
                 rounds=rounds)


def _series(key: tuple, g: pd.DataFrame, min_effect: float, alpha: float) -> Series:
    run_key = g["run_id"].where(g["run_id"].notna(), g["timestamp"].astype(str))
    points = [_point(str(run), r) for run, r in g.groupby(run_key, sort=False)]
    points.sort(key=lambda p: (p.when is None, p.when if p.when is not None else pd.Timestamp(0, tz="UTC"), p.run))
    for prev, cur in zip(points, points[1:], strict=False):
        if prev.rounds and cur.rounds:
            cur.change = compare_samples(prev.rounds, cur.rounds, min_effect=min_effect, alpha=alpha)
    problem, workload, gpu, candidate = key
    return Series(problem, workload, gpu, candidate, points)


def result_history(results: pd.DataFrame, selection: Selection | None = None, *,
                   min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = DEFAULT_ALPHA,
                   min_points: int = 1) -> History:
    """The history of every series in the selected PASSED records (a DataFrame from
    :func:`solbench.load_results`), one roof per GPU as the leaderboard's; series with fewer than
    ``min_points`` runs are left out."""
    if not 0 <= min_effect < 1 or not 0 < alpha < 1:
        raise SolbenchError("--min-effect must be in [0, 1) and --alpha in (0, 1)")
    records, left_out = select_records(results, selection)
    passed = records[records["status"] == "PASSED"]
    if passed.empty:
        raise SolbenchError("no PASSED record in these results: a history needs timed runs")
    series = [_series(k, g, min_effect, alpha)
              for k, g in passed.groupby(["problem", "workload", "gpu", "solution"], sort=True)]
    series = [s for s in series if len(s.points) >= min_points]
    roofs = {str(g): str(r) for g, r in records[["gpu", "roof"]].drop_duplicates().itertuples(index=False)}
    return History(series, roofs, min_effect, alpha, [*left_out, *results.attrs.get("warnings", [])])


# ---------------------------------------------------------------------------------------------
# Tables

HEADERS = ("problem", "workload", "GPU", "candidate", "when", "commit", "version", "time", "SOL", "change")


def _change_text(p: Point) -> str:
    if p.change is None:
        return ""
    c = p.change
    mark = {"slower": "▼ slower", "faster": "▲ faster"}.get(c.verdict, "same")
    return f"{mark} {(c.ratio - 1) * 100:+.1f}% p={c.p_value:.2g}"


def history_rows(h: History) -> list[list[str]]:
    """One row per point, as display strings (terminal, markdown and the report read the same)."""
    rows = []
    for s in h.series:
        for p in s.points:
            rows.append([one_line(s.problem, 80), one_line(s.workload, 60), one_line(s.gpu, 40),
                         one_line(s.candidate, 60), p.when.strftime("%Y-%m-%d %H:%M") if p.when is not None else "-",
                         one_line(p.commit_text, 20), one_line(p.version or "-", 20), si(p.time_s, "s"), sol_text(p.sol),
                         _change_text(p)])
    return rows


def to_markdown(h: History) -> str:
    parts = ["# History", "",
             f"Change: the run differs from the one before it (p < {h.alpha:g}, at least {h.min_effect * 100:g}%); "
             "time ratio in percent.", "", "| " + " | ".join(HEADERS) + " |", "|" + "|".join(" --- " for _ in HEADERS) + "|"]
    parts += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in history_rows(h)]
    return "\n".join(parts) + "\n"


def to_json(h: History) -> str:
    return json.dumps(h.to_dict(), indent=2, default=str)


# ---------------------------------------------------------------------------------------------
# Chart

def _run_axis(series: list[Series]) -> tuple[dict[str, int], list[str]]:
    """Every run of the chart in time order: its x position, and the tick labels (commit or date)."""
    first: dict[str, Point] = {}
    for s in series:
        for p in s.points:
            if p.run not in first or (p.when is not None and first[p.run].when is not None and p.when < first[p.run].when):
                first[p.run] = p
    order = sorted(first.values(), key=lambda p: (p.when is None, p.when or pd.Timestamp(0, tz="UTC"), p.run))
    return {p.run: i for i, p in enumerate(order)}, [label(p.label, 12) for p in order]


def _draw_panel(ax: Any, series: list[Series], x_of: dict[str, int], styles: dict) -> None:
    for s in series:
        pts = [p for p in s.points if p.sol is not None]
        style = styles[f"{s.candidate} · {s.workload}"]
        xs, ys = [x_of[p.run] for p in pts], [p.sol for p in pts]
        err = [p.sol * p.ci_rel if p.ci_rel is not None else 0.0 for p in pts]
        ax.errorbar(xs, ys, yerr=err, color=style.color, marker=style.marker, ms=4, lw=1.2, capsize=2,
                    label=label(f"{s.candidate} · {s.workload}", 48))
        for p in pts:
            if p.is_change:
                slower = p.change.verdict == "slower"
                ax.plot([x_of[p.run]], [p.sol], marker="v" if slower else "^", ms=11, mfc="none", mew=2,
                        color="#c0392b" if slower else "#1e8449", zorder=5)


def _y_scale(ax: Any, sols: list[float]) -> None:
    """Linear from 0, or logarithmic when the panel's SOLs span more than LOG_SPAN (decode and prefill)."""
    if sols and max(sols) > LOG_SPAN * min(sols):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)


def history_figure(h: History, *, title: str | None = None) -> Figure:
    """SOL per run, one panel per (problem, GPU), one line per (candidate, workload); change points
    ringed (red ▼ slower, green ▲ faster); error bars: the 95% interval of each run's median."""
    import matplotlib as mpl

    panels: dict[tuple[str, str], list[Series]] = {}
    for s in h.series:
        panels.setdefault((s.problem, s.gpu), []).append(s)
    if not panels:
        raise SolbenchError("no series to chart")
    keys = sorted(panels)[:MAX_PANELS]
    x_of, ticks = _run_axis([s for k in keys for s in panels[k]])
    styles = candidate_styles(sorted({f"{s.candidate} · {s.workload}" for k in keys for s in panels[k]}))
    with mpl.rc_context(RC):
        fig = Figure(figsize=(max(7.0, 0.55 * len(ticks) + 3), 3.2 * len(keys) + 0.4), layout="constrained")
        axes = fig.subplots(len(keys), 1, squeeze=False)[:, 0]
        for ax, key in zip(axes, keys, strict=True):
            _draw_panel(ax, panels[key], x_of, styles)
            ax.set_title(label(f"{key[0]} on {key[1]} ({h.roofs.get(key[1], '?')} roof)", 90))
            ax.set_ylabel("SOL")
            ax.set_xticks(range(len(ticks)), ticks, rotation=30, ha="right")
            _y_scale(ax, [p.sol for s in panels[key] for p in s.points if p.sol])
            ax.legend(loc="best", fontsize=8)
        more = len(panels) - len(keys)
        fig.suptitle(label(title or "SOL by run" + (f" (first {len(keys)} of {len(panels)} panels)" if more else ""),
                           120))
    return fig
