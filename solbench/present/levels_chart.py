"""The hierarchical roofline: each profiled kernel at HBM, L2 and L1, under the roof of each level.

A kernel profiled by `solbench profile` has counted FLOPs, a duration and the bytes it moved at three
levels of the memory hierarchy (DRAM, L2, L1). Its achieved FLOP/s is one height; its arithmetic
intensity against each level's bytes gives three points on that height, each under its own
diagonal (the level's bandwidth). A point near its diagonal is bound by that level; the three
points' spread shows how much reuse each cache gives. Bandwidths come from the spec file
(``memory_bandwidth``, ``l2_bandwidth``, ``l1_bandwidth``); a level the spec lacks takes the peak
Nsight Compute reported at the run's clocks (the profiles' ``summary.<level>_peak_bytes_per_s``).
Kernels that count no FLOPs (copies, gathers) have no place on a FLOP/s axis and are counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from solbench.data import HardwareSpec
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
from solbench.present.roofline_chart import SHORT_DTYPE, resolve_roofs
from solbench.units import si

# Each level: the kernel's bytes field, the spec's bandwidth key, its colour and name.
LEVELS = {"dram": ("dram_bytes", "HBM", "#222222"), "l2": ("l2_bytes", "L2", "#1f77b4"),
          "l1": ("l1_bytes", "L1", "#2ca02c")}


@dataclass
class LevelRoof:
    """One memory level's bandwidth and where the number comes from."""

    level: str
    bandwidth: float
    source: str


def _kernel_bytes(kernel: dict, level: str) -> float | None:
    if level == "dram":
        parts = [kernel.get("dram_read_bytes"), kernel.get("dram_write_bytes")]
        return None if all(p is None for p in parts) else sum(p or 0.0 for p in parts)
    return kernel.get(LEVELS[level][0])


def level_points(records: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """One row per (profiled kernel, level) with FLOPs: candidate, workload, kernel, level, intensity,
    FLOP/s; and how many profiled kernels counted no FLOPs."""
    rows, no_flops = [], 0
    if not {"profile.kernels", "profile.status"} <= set(records.columns):
        return pd.DataFrame(rows), 0
    ok = records[(records["status"] == "PASSED") & (records["profile.status"] == "ok")]
    for rec in ok[["problem", "workload", "solution", "profile.kernels"]].to_dict("records"):
        for k in rec["profile.kernels"] if isinstance(rec["profile.kernels"], list) else []:
            flops, seconds = sum((k.get("flops") or {}).values()), k.get("duration_s") or 0.0
            if flops <= 0 or seconds <= 0:
                no_flops += 1
                continue
            for level in LEVELS:
                moved = _kernel_bytes(k, level)
                if moved:
                    rows.append({"problem": rec["problem"], "workload": rec["workload"], "solution": rec["solution"],
                                 "kernel": str(k.get("name", "?")), "level": level, "intensity": flops / moved,
                                 "flops_per_s": flops / seconds})
    return pd.DataFrame(rows), no_flops


def level_roofs(spec: HardwareSpec | None, records: pd.DataFrame) -> list[LevelRoof]:
    """Each level's bandwidth: the spec's, else the median peak ncu reported in the profiles."""
    stated = spec.level_bandwidths() if spec is not None else {}
    roofs = []
    for level, (_, name, _) in LEVELS.items():
        if level in stated:
            roofs.append(LevelRoof(level, stated[level], f"{name} {si(stated[level], 'B/s')} ({spec.id})"))
            continue
        col = f"profile.summary.{level}_peak_bytes_per_s"
        peaks = pd.to_numeric(records.get(col, pd.Series(dtype=float)), errors="coerce").dropna()
        if not peaks.empty:
            bw = float(peaks.median())
            roofs.append(LevelRoof(level, bw, f"{name} {si(bw, 'B/s')} (ncu's peak at the run's clocks)"))
    return roofs


def _spec(gpu: str, records: pd.DataFrame, specs: list[HardwareSpec] | None) -> tuple[HardwareSpec | None, dict]:
    """The datasheet spec of the GPU (for its level bandwidths) and the peaks per compute dtype."""
    from solbench.present.roofline_chart import _all_specs

    known = {s.id: s for s in (specs if specs is not None else _all_specs())}
    spec = known.get(gpu)
    if spec is not None and spec.kind == "measured" and spec.based_on in known:
        spec = known[spec.based_on]
    roofs = resolve_roofs(gpu, records, specs)
    return spec, (roofs[0].peaks if roofs else {})


def levels_figure(records: pd.DataFrame, *, title: str | None = None, specs: list[HardwareSpec] | None = None,
                  notes: Sequence[str] = ()) -> Figure:
    """The hierarchical roofline of already-selected records (one GPU) that carry profiles."""
    gpu = single_gpu(records)
    points, no_flops = level_points(records)
    if points.empty:
        raise SolbenchError("no profiled kernel with FLOPs to plot: the hierarchical roofline needs records from "
                            "`solbench profile` (profile.status ok) whose kernels count FLOPs")
    spec, peaks = _spec(gpu, records, specs)
    roofs = level_roofs(spec, records)
    with mpl.rc_context(RC):
        fig = Figure(figsize=(12, 6.6))
        fig.set_label(FIXED_LAYOUT)
        ax = fig.add_axes((0.105, 0.13, 0.575, 0.73))
        ax.set_xscale("log")
        ax.set_yscale("log")
        xlo, xhi, ylo, yhi = _limits(points, roofs, peaks)
        ax.set_xlim(xlo, xhi)
        ax.set_ylim(ylo, yhi)
        _draw_level_roofs(ax, roofs, peaks, xlo, xhi)
        order = [c for c in candidate_order(records) if c in set(points["solution"])]
        styles = candidate_styles(order)
        _draw_kernels(ax, points, order, styles)
        ax.set_xlabel("arithmetic intensity (counted FLOP / byte moved at each level)")
        ax.set_ylabel("achieved FLOP/s (counted FLOPs / kernel duration)")
        ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: si(v, "FLOP/s", 3)))
        problems = sorted(points["problem"].unique())
        subject = label(problems[0], 60) if len(problems) == 1 else f"{len(problems)} problems"
        fig.suptitle(title or f"Hierarchical roofline: {subject} on {label(spec.name if spec else gpu, 60)}",
                     x=0.105, ha="left", y=0.95, fontsize=13, fontweight="bold")
        _legend(fig, order, styles, roofs)
        extra = [f"{no_flops} profiled kernel(s) with no counted FLOPs not plotted"] if no_flops else []
        extra += footnote_notes(notes)
        fig.text(0.105, 0.035, footnote(records, str(records["roof"].iloc[0]), extra), fontsize=7.5, color="#555",
                 ha="left", wrap=True)
    return fig


def _limits(points: pd.DataFrame, roofs: list[LevelRoof], peaks: dict[str, float]) -> tuple[float, ...]:
    xs, ys = points["intensity"], points["flops_per_s"]
    ridges = [p / r.bandwidth for r in roofs for p in peaks.values()]
    xlo = 10 ** math.floor(math.log10(min(xs.min(), *ridges) / 10)) if ridges else xs.min() / 10
    xhi = max(xs.max(), *ridges) * 30 if ridges else xs.max() * 10
    ylo = 10 ** math.floor(math.log10(max(ys.min() / 10, 1.0)))
    yhi = max(ys.max(), *peaks.values()) * 3 if peaks else ys.max() * 10
    return xlo, xhi, ylo, yhi


def _draw_level_roofs(ax, roofs: list[LevelRoof], peaks: dict[str, float], xlo: float, xhi: float) -> None:
    """A diagonal per level, up to the highest compute roof; a flat roof per compute dtype."""
    top = max(peaks.values()) if peaks else None
    for roof in roofs:
        colour = LEVELS[roof.level][2]
        x_end = top / roof.bandwidth if top else xhi
        ax.plot([xlo, x_end], [roof.bandwidth * xlo, roof.bandwidth * x_end], color=colour, lw=1.4, zorder=2)
    for dtype, peak in sorted(peaks.items(), key=lambda kv: -kv[1]):
        ridge = min(peak / r.bandwidth for r in roofs) if roofs else xlo
        ax.plot([ridge, xhi], [peak, peak], color="#333", lw=1.4, zorder=2)
        ax.annotate(f"{SHORT_DTYPE.get(dtype, dtype)} {si(peak, 'FLOP/s')}", (xhi, peak), xytext=(-4, 3),
                    textcoords="offset points", fontsize=8, ha="right", va="bottom", color="#333")


def _draw_kernels(ax, points: pd.DataFrame, order: list[str], styles: dict) -> None:
    """Per kernel, its three points joined by a thin line (one height); colour = level, marker = candidate."""
    for _, g in points.groupby(["solution", "problem", "workload", "kernel"], sort=False):
        g = g.sort_values("intensity")
        ax.plot(g["intensity"], g["flops_per_s"], color="#bbb", lw=0.7, zorder=3)
    for cand in order:
        c = points[points["solution"] == cand]
        for level, (_, _, colour) in LEVELS.items():
            at = c[c["level"] == level]
            ax.scatter(at["intensity"], at["flops_per_s"], marker=styles[cand].marker, s=40, zorder=5,
                       facecolors=colour, edgecolors="white", linewidths=0.6)


def _legend(fig: Figure, order: list[str], styles: dict, roofs: list[LevelRoof]) -> None:
    handles = [Line2D([], [], color=LEVELS[r.level][2], lw=1.6, label=r.source) for r in roofs]
    handles += [Line2D([], [], ls="none", marker=styles[c].marker, color="#666", ms=7, label=label(c, 34))
                for c in order]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.70, 0.86), frameon=False,
               title="memory level (colour) and candidate (marker)", alignment="left", title_fontsize=9)
