"""SOL bars: one bar per (candidate, workload), grouped by workload, one panel per problem.

A bar is the candidate's best PASSED SOL; hatching marks memory-bound workloads; a failed
workload shows the status instead of a bar; the dashed line at 1.0 is the speed of light.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from solbench.errors import SolbenchError
from solbench.present.chart_style import (
    FIXED_LAYOUT,
    RC,
    candidate_order,
    candidate_styles,
    footnote,
    footnote_notes,
    label,
    single_gpu,
)
from solbench.present.frame import STATUS_SHORT
from solbench.present.ranking import best_results
from solbench.present.roofline_chart import NOISY_LABEL, NOISY_RING
from solbench.units import sol_text

MEMORY_HATCH = "////"
LOG_BELOW = 0.05  # best SOL under this: the SOL axis is logarithmic
MAX_VALUE_LABELS = 48  # bars per panel above which the SOL values are not written on the bars


def _latest_failure(records: pd.DataFrame) -> dict[tuple[str, str, str], str]:
    """(problem, workload, candidate) -> status of its latest failure, for cells with no PASSED run."""
    failed = records[records["status"] != "PASSED"].sort_values("timestamp", na_position="first")
    return {(p, w, c): s for p, w, c, s in zip(failed["problem"], failed["workload"], failed["solution"],
                                               failed["status"], strict=True)}


def sol_figure(records: pd.DataFrame, *, title: str | None = None, notes: Sequence[str] = ()) -> Figure:
    """The SOL bar chart of already-selected records (one GPU, one roof). ``notes``: what the selection
    left out, for the footnote."""
    gpu = single_gpu(records)
    roof = str(records["roof"].iloc[0])
    best = best_results(records)
    failures = _latest_failure(records)
    order = candidate_order(records)
    styles = candidate_styles(order)
    hacked = set(records.loc[records["status"] == "REWARD_HACK", "solution"])
    problems = sorted(records["problem"].unique())
    if not problems:
        raise SolbenchError("no records to plot")
    per_problem = []
    for prob in problems:
        r = records[records["problem"] == prob]
        wl = r.groupby("workload").agg(ai=("arithmetic_intensity", "median"), bound=("bound", "first"))
        wl = wl.sort_values(["ai"], na_position="last")  # decode (memory) to prefill (compute)
        cands = [c for c in order if c in set(r["solution"])]
        per_problem.append((prob, wl, cands))
    widest = max(len(wl) * (len(c) + 1) for _, wl, c in per_problem)
    ymax = max(1.2, float(best["sol"].max()) * 1.2) if not best.empty else 1.2
    # Far below the roof (a CPU run, a naive kernel) linear bars would all be flat: use a log axis.
    ymin = float(best["sol"].min()) / 3 if not best.empty and best["sol"].max() < LOG_BELOW else 0.0
    with mpl.rc_context(RC):
        # Margins in inches, laid out by hand: no tight-layout pass (it costs as much as drawing).
        plot_w = min(22.0, max(6.5, 0.16 * widest + 2.0))
        width, height = plot_w + 0.8 + 3.0, 1.25 + 2.9 * len(problems)
        fig = Figure(figsize=(width, height))
        fig.set_label(FIXED_LAYOUT)
        fig.subplots_adjust(left=0.8 / width, right=(0.8 + plot_w) / width, top=1 - 0.75 / height,
                            bottom=0.75 / height, hspace=0.95 / 2.0)
        axes = fig.subplots(len(problems), 1, squeeze=False)[:, 0]
        for ax, (prob, wl, cands) in zip(axes, per_problem, strict=True):
            _panel(ax, prob, wl, cands, best, failures, styles, hacked, (ymin, ymax))
        gpu_name = label(records["device"].dropna().iloc[0], 50) if records["device"].notna().any() else gpu
        fig.suptitle(title or f"SOL per workload on {gpu_name} ({gpu}, {roof} roof)", x=0.8 / width, ha="left",
                     y=1 - 0.15 / height, va="top",
                     fontsize=13, fontweight="bold")
        handles = [Patch(facecolor=styles[c].color, label=label(c) + (" (REWARD_HACK)" if c in hacked else ""))
                   for c in order]
        handles += [Patch(facecolor="#ddd", edgecolor="#555", hatch=MEMORY_HATCH, label="memory-bound workload"),
                    Patch(facecolor="#ddd", edgecolor="#555", label="compute-bound workload"),
                    Line2D([], [], color="#c0392b", ls="--", label="SOL = 1 (speed of light)"),
                    Line2D([], [], color="#555", marker="x", ls="none", label="failed (status shown)")]
        if "noisy" in best.columns and (best["noisy"].fillna("") != "").any():
            handles.append(Line2D([], [], ls="none", marker="o", ms=9, mfc="none", mec="#222",
                                  label=NOISY_LABEL + "\n(ringed along the panel's top)"))
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=((1.0 + plot_w) / width, 1 - 0.75 / height),
                   frameon=False, title="candidate",
                   alignment="left")
        fig.text(0.8 / width, 0.1 / height, footnote(records, roof, footnote_notes(notes)), fontsize=7.5, color="#555",
                 ha="left", wrap=True)
    return fig


def _marks(prob: str, cand: str, slots: Iterable[tuple[float, str, str | None]],
           sol_of: dict[tuple[str, str], float], noisy: set[tuple[str, str]],
           failures: dict[tuple[str, str, str], str]) -> tuple[list, list, list]:
    """A candidate's marks over its (x, workload, hatch) slots: bars (x, SOL, hatch), noisy rings (x, SOL) and
    failures (x, status)."""
    bars: list[tuple[float, float, str | None]] = []
    rings: list[tuple[float, float]] = []
    failed: list[tuple[float, str]] = []
    for x, w, hatch in slots:
        if (sol := sol_of.get((w, cand))) is not None:
            bars.append((x, sol, hatch))
            if (w, cand) in noisy:
                rings.append((x, sol))
        elif (status := failures.get((prob, w, cand))) is not None:
            failed.append((x, status))
    return bars, rings, failed


def _panel(ax, prob: str, wl: pd.DataFrame, cands: list[str], best: pd.DataFrame,
           failures: dict[tuple[str, str, str], str], styles: dict, hacked: set[str],
           ylim: tuple[float, float]) -> None:
    ymin, ymax = ylim
    log = ymin > 0

    def above(y: float, frac: float) -> float:  # a little above y, in the axis' own terms
        return y * (ymax / ymin) ** frac if log else y + ymax * frac

    n = max(1, len(cands))
    width = 0.84 / n
    mine = best[best["problem"] == prob]
    sol_of = {(w, c): s for w, c, s in zip(mine["workload"], mine["solution"], mine["sol"], strict=True)}
    noisy = {(w, c) for w, c, n in zip(mine["workload"], mine["solution"], mine["noisy"], strict=True) if n} \
        if "noisy" in mine.columns else set()
    show_values = len(wl) * n <= MAX_VALUE_LABELS
    hatches = [MEMORY_HATCH if b == "memory" else None for b in wl["bound"]]
    for j, cand in enumerate(cands):
        xs = np.arange(len(wl)) - 0.42 + width * (j + 0.5)
        bars, rings, failed = _marks(prob, cand, zip(xs, wl.index, hatches, strict=True), sol_of, noisy, failures)
        if bars:  # one call per candidate: a bar() call per bar costs more than drawing it
            bx, bs, bh = zip(*bars, strict=True)
            ax.bar(bx, bs, width * 0.92, color=styles[cand].color, hatch=list(bh), edgecolor="white",
                   linewidth=0.4, alpha=0.45 if cand in hacked else 1.0)
            if rings:  # the roofline's dashed ring, in a row along the panel's top: a time too noisy to rank on
                ax.scatter([x for x, _ in rings], [above(ymin, 0.92) if log else ymax * 0.92] * len(rings),
                           **{**NOISY_RING, "s": 70, "zorder": 4})
            if show_values:
                for x, sol in zip(bx, bs, strict=True):
                    text = sol_text(sol)  # upright only when there is room for it above its bar
                    ax.text(x, above(sol, 0.015), text, ha="center", va="bottom", fontsize=6.5,
                            rotation=90 if n > 3 or len(text) > 5 else 0, color="#333")
        if failed:
            fx = [x for x, _ in failed]
            ax.plot(fx, [above(ymin, 0.03) if log else ymax * 0.03] * len(fx), ls="none", marker="x",
                    color=styles[cand].color, ms=6, mew=1.6)
            for x, status in failed:
                ax.text(x, above(ymin, 0.07) if log else ymax * 0.07, STATUS_SHORT.get(status, status[:4]), ha="center", va="bottom",
                        fontsize=6.5, rotation=90, color="#555")
    ax.axhline(1.0, color="#c0392b", ls="--", lw=1.1, zorder=0)
    ax.set_xticks(np.arange(len(wl)), [f"{label(w, 22)}\n{row['bound'] or '?'}" for w, row in wl.iterrows()],
                  fontsize=8)
    ax.set_xlim(-0.6, len(wl) - 0.4)
    if log:
        ax.set_yscale("log")
    ax.set_ylim(ymin, ymax)
    ax.set_ylabel("SOL")
    ax.set_title(label(prob, 80), loc="left", fontsize=10.5)
    ax.grid(axis="x", visible=False)
