"""The roofline chart: achieved FLOP/s against arithmetic intensity, under the GPU's roofs.

One flat roof per compute precision the results use, the memory diagonal, the ridge points; the
datasheet roof dashed and, when a measured spec refines it, the measured roof solid. Each
(candidate, workload) is one marker; a problem's workloads are joined in order of intensity, so
the bottleneck moving from memory (decode) to compute (prefill) shows as a trajectory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from solbench.data import HardwareSpec, list_specs, load_spec_id, spec_dirs
from solbench.errors import SolbenchError, SpecError
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
from solbench.present.label_layout import place_labels
from solbench.present.markup import one_line
from solbench.present.ranking import best_results
from solbench.present.svg_marks import tooltips
from solbench.units import si, sol_text

SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64", "tf32": "tf32",
               "float8_e4m3fn": "fp8", "float8_e5m2": "fp8 e5m2", "int8": "int8"}
MAX_NUMBERED_PROBLEMS = 64  # a library chart numbers every problem, so each point traces to one
ROOF_STYLE = {"datasheet": "--", "measured": "-", "estimate": ":"}


@dataclass
class Roof:
    """One set of ceilings: a memory bandwidth and a peak per precision."""

    kind: str  # datasheet | measured | estimate (the roof column of the records)
    name: str
    bandwidth: float
    peaks: dict[str, float] = field(default_factory=dict)
    recovered: bool = False  # no spec file found here: the ceilings are read back from the records (dotted)

    @property
    def style(self) -> str:
        return ":" if self.recovered else ROOF_STYLE.get(self.kind, "--")

    def ridge(self, dtype: str) -> float:
        return self.peaks[dtype] / self.bandwidth


def _roof_from_spec(spec: HardwareSpec, kind: str, dtypes: list[str]) -> Roof:
    peaks = {}
    for d in dtypes:
        try:
            peaks[d] = spec.peak(d)
        except SpecError:
            continue  # a precision this spec has no peak for: no flat roof drawn for it
    return Roof(kind, spec.name, spec.memory_bandwidth, peaks)


def _roof_from_records(records: pd.DataFrame, dtypes: list[str]) -> Roof | None:
    """The ceilings the records were scored against, recovered as FLOPs / T_compute and bytes / T_memory."""
    r = records.dropna(subset=["t_compute_s", "t_memory_s"])
    r = r[(r["t_compute_s"] > 0) & (r["t_memory_s"] > 0)]
    if r.empty:
        return None
    bw = float((r["bytes"] / r["t_memory_s"]).median())
    peaks = {d: float((g["flops"] / g["t_compute_s"]).median()) for d, g in r.groupby("compute_dtype")
             if d in dtypes}
    # Named as the records name their roof: a spec not found here (the built-in CPU estimate, a
    # measured spec kept beside its results) is still the roof they were scored against.
    kind = str(records["roof"].dropna().iloc[0]) if records["roof"].notna().any() else "recorded"
    return Roof(kind, str(records["gpu"].iloc[0]), bw, peaks, recovered=True)


def resolve_roofs(gpu: str, records: pd.DataFrame, specs: list[HardwareSpec] | None = None) -> list[Roof]:
    """Datasheet roof, plus the measured roof when a measured spec refines it (``based_on``).

    ``specs`` overrides the spec lookup (tests, custom specs); when no spec is found the roofs are
    recovered from the records themselves.
    """
    dtypes = sorted({d for d in records["compute_dtype"].dropna()})
    known = {s.id: s for s in (specs if specs is not None else _all_specs())}
    datasheet = known.get(gpu)
    if datasheet is None:
        try:
            datasheet = load_spec_id(gpu)  # a GPU id from a record: never a path to open
        except (SpecError, OSError):
            datasheet = None
    measured = None
    if datasheet is not None and datasheet.kind == "measured":
        measured, datasheet = datasheet, known.get(datasheet.based_on or "")
    if measured is None and datasheet is not None:
        used = set(records.loc[records["roof"] == "measured", "gpu_spec"].dropna())
        candidates = [s for s in known.values() if s.kind == "measured" and s.based_on == datasheet.id]
        candidates.sort(key=lambda s: (s.id not in used, s.measured.timestamp if s.measured else ""), reverse=False)
        measured = candidates[0] if candidates else None
    roofs = []
    if datasheet is not None:
        roofs.append(_roof_from_spec(datasheet, "datasheet", dtypes))
    if measured is not None:
        roofs.append(_roof_from_spec(measured, "measured", dtypes))
    if not roofs:
        derived = _roof_from_records(records, dtypes)
        roofs = [derived] if derived else []
    return [r for r in roofs if r.peaks]


def _all_specs() -> list[HardwareSpec]:
    """Every spec file, parsed once per process while the files stay the same (a report draws many charts)."""
    files = tuple((str(f), f.stat().st_mtime_ns) for d in spec_dirs() if d.is_dir() for f in sorted(d.glob("*.yaml")))
    return list(_parsed_specs(files))


@lru_cache(maxsize=4)
def _parsed_specs(files: tuple[tuple[str, int], ...]) -> tuple[HardwareSpec, ...]:
    try:
        return tuple(list_specs())
    except SpecError:
        return ()  # a broken spec file elsewhere must not stop a chart; the records' roof is used


def _spread(positions: list[float], gap: float) -> list[float]:
    """Label positions (sorted, display units) at least ``gap`` apart, each cluster centred on its points."""
    out: list[float] = []
    for p in positions:
        out.append(max(p, out[-1] + gap) if out else p)
    i = 0
    while i < len(out):  # centre each run of pushed labels on the points it labels
        j = i
        while j + 1 < len(out) and out[j + 1] - out[j] <= gap + 1e-9:
            j += 1
        shift = float(np.mean([out[k] - positions[k] for k in range(i, j + 1)]))
        lower = out[i - 1] + gap if i else -math.inf
        shift = min(shift, out[i] - lower)
        for k in range(i, j + 1):
            out[k] -= shift
        i = j + 1
    return out


def _workload_labels(ax, best: pd.DataFrame) -> None:
    """Workload names above the axes at their intensity, spread apart with leader lines when close."""
    items = sorted((float(v), label(k, 28)) for k, v in
                   best.groupby("workload")["arithmetic_intensity"].median().items())
    y0 = ax.get_ylim()[0]
    disp = [ax.transData.transform((x, y0))[0] for x, _ in items]
    x0, x1 = ax.bbox.x0, ax.bbox.x1
    # A rotated label is a line of text across: its height, and a little air (more labels than fit: smaller).
    fontsize = min(8.0, max(5.0, (x1 - x0) / max(1, len(items)) / 1.3 * 72 / ax.figure.dpi))
    gap = 1.3 * fontsize * ax.figure.dpi / 72
    spread = _spread(disp, gap=gap)
    if spread and spread[-1] > x1 + gap:  # pushed past the right edge: the whole run moves left, not past x0
        spread = [p - min(spread[-1] - x1, max(0.0, spread[0] - x0)) for p in spread]
    inv = ax.transData.inverted()
    leaders = []
    blend = mpl.transforms.blended_transform_factory(ax.transData, ax.transAxes)
    for (x, name), px in zip(items, spread, strict=True):
        xl = inv.transform((px, ax.transData.transform((x, y0))[1]))[0]
        ax.text(xl, 1.045, name, transform=blend, rotation=90, ha="center", va="bottom", fontsize=fontsize,
                color="#333", clip_on=False)
        leaders.append([(x, 1.0), (xl, 1.04)])
    # Plain text and one line collection: arrows (annotate) cost several times more to draw.
    ax.add_collection(LineCollection(leaders, colors="#999", linewidths=0.6, transform=blend, clip_on=False))


def roofline_figure(records: pd.DataFrame, *, title: str | None = None,
                    specs: list[HardwareSpec] | None = None, notes: Sequence[str] = ()) -> Figure:
    """The roofline chart of already-selected records (one GPU, one roof: see frame.select). ``notes``:
    what the selection left out, for the footnote."""
    gpu = single_gpu(records)
    roof_kind = str(records["roof"].iloc[0])
    best = best_results(records)
    plottable = (best["arithmetic_intensity"] > 0) & (best["achieved_flops_per_s"] > 0)
    no_flops = int((~plottable).sum())  # pure data movement (0 FLOPs) has no place on a FLOP/s axis
    best = best[plottable]
    if best.empty:
        raise SolbenchError("no PASSED result with FLOPs to plot: a roofline plots FLOP/s (problems that only move "
                            "data count 0 FLOPs); use `solbench plot sol` for those")
    roofs = resolve_roofs(gpu, records, specs)
    with mpl.rc_context(RC):
        fig = Figure(figsize=(12, 6.6))
        fig.set_label(FIXED_LAYOUT)  # every element is placed inside the figure: no "tight" pass on save
        n_problems = best["problem"].nunique()
        top = 0.76 if n_problems == 1 else 0.86  # a single problem has its workload names above the axes
        ax = fig.add_axes((0.105, 0.13, 0.575, top - 0.13))
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs, ys = best["arithmetic_intensity"].to_numpy(), best["achieved_flops_per_s"].to_numpy()
        ridges = [r.ridge(d) for r in roofs for d in r.peaks]
        peaks = [p for r in roofs for p in r.peaks.values()]
        # Room left of the lowest point for the memory roof's label.
        xlo = 10 ** math.floor(math.log10(min(xs.min(), *ridges) / 20)) if ridges else xs.min() / 10
        xhi = max(xs.max(), *ridges) * 30 if ridges else xs.max() * 10  # room for the roof labels
        ylo = 10 ** math.floor(math.log10(min(ys.min(), xlo * min((r.bandwidth for r in roofs), default=ys.min()))))
        ylo = max(ylo, ys.min() / 100)
        yhi = max(ys.max(), *peaks) * 3 if peaks else ys.max() * 10
        ax.set_xlim(xlo, xhi)
        ax.set_ylim(ylo, yhi)
        _draw_roofs(ax, roofs, xlo, xhi)
        order = candidate_order(records)
        styles = candidate_styles(order)
        hacked = set(records.loc[records["status"] == "REWARD_HACK", "solution"])
        order = [c for c in order if c in set(best["solution"])]  # nothing plotted, nothing in the legend
        _draw_points(ax, best, order, styles, hacked)
        problems = sorted(best["problem"].unique())
        if len(problems) == 1:
            _workload_labels(ax, best)
        elif len(problems) <= MAX_NUMBERED_PROBLEMS:
            _number_problems(ax, best, problems)
        ax.set_xlabel("arithmetic intensity (FLOP / byte of minimal memory traffic)")
        ax.set_ylabel("achieved FLOP/s")
        # Plain-text tick labels (1k, not 10^3): easier to read, and no mathtext to lay out.
        ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}" if v < 1000 else si(v, "", 3)))
        ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: si(v, "FLOP/s", 3)))
        # Grid at each decade only: minor ticks on two log axes cost most of the drawing time.
        ax.xaxis.set_minor_locator(mpl.ticker.NullLocator())
        ax.yaxis.set_minor_locator(mpl.ticker.NullLocator())
        gpu_name = roofs[0].name if roofs else gpu
        subject = label(problems[0], 60) if len(problems) == 1 else f"{len(problems)} problems"
        fig.suptitle(title or f"Roofline: {subject} on {label(gpu_name, 60)}", x=0.105, ha="left",
                     y=0.985 if n_problems == 1 else top + 0.06,
                     fontsize=13, fontweight="bold")
        _legend(fig, order, styles, roofs, hacked, top, problems if 1 < n_problems <= MAX_NUMBERED_PROBLEMS else [],
                noisy="noisy" in best.columns and bool((best["noisy"].fillna("") != "").any()))
        skipped = int((records["status"] != "PASSED").sum())
        extra = [f"{skipped} failed result(s) not plotted"] if skipped else []
        if no_flops:
            extra.append(f"{no_flops} result(s) with 0 FLOPs (data movement only) not plotted")
        extra += footnote_notes(notes)
        fig.text(0.105, 0.035, footnote(records, roof_kind, extra), fontsize=7.5, color="#555", ha="left", wrap=True)
    return fig


def _draw_roofs(ax, roofs: list[Roof], xlo: float, xhi: float) -> None:
    """Roof lines, their labels and the ridge points. The first roof's labels go above its lines and
    the second's below, so two close roofs (datasheet and measured) stay readable."""
    ridges: list[tuple[float, str]] = []
    for i, roof in enumerate(roofs):
        ls = roof.style
        above = i % 2 == 0
        top_ridge = max(roof.ridge(d) for d in roof.peaks)
        ax.plot([xlo, top_ridge], [roof.bandwidth * xlo, roof.bandwidth * top_ridge], ls=ls, color="#333", lw=1.4,
                zorder=2)
        # The diagonal's label, rotated along the line (its screen angle depends on the axes' shape).
        x_lab = xlo * 1.4
        p0 = ax.transData.transform((x_lab, roof.bandwidth * x_lab))
        p1 = ax.transData.transform((x_lab * 10, roof.bandwidth * x_lab * 10))
        angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
        ax.annotate(f"memory {si(roof.bandwidth, 'B/s')} ({roof.kind})", (x_lab, roof.bandwidth * x_lab),
                    xytext=(-4, 5) if above else (4, -5), textcoords="offset points", rotation=angle,
                    rotation_mode="anchor", fontsize=8, color="#333", ha="left", va="bottom" if above else "top")
        for dtype, peak in sorted(roof.peaks.items(), key=lambda kv: -kv[1]):
            ridge = roof.ridge(dtype)
            ax.plot([ridge, xhi], [peak, peak], ls=ls, color="#333", lw=1.4, zorder=2)
            ax.plot([ridge], [peak], marker="o", ms=4, color="#333", zorder=3)
            ax.annotate(f"{SHORT_DTYPE.get(dtype, dtype)} {si(peak, 'FLOP/s')} ({roof.kind})", (xhi, peak),
                        xytext=(-4, 3 if above else -3), textcoords="offset points", fontsize=8, ha="right",
                        va="bottom" if above else "top", color="#333")
            ax.plot([ridge, ridge], [ax.get_ylim()[0], peak], ls=":", color="#999", lw=0.8, zorder=1)
            ridges.append((ridge, f"ridge {ridge:.3g} FLOP/B ({SHORT_DTYPE.get(dtype, dtype)}, {roof.kind})"))
    # Ridge labels stand at the foot of their drop lines, where the chart is empty (below the diagonal).
    y0 = ax.get_ylim()[0]
    ridges.sort()
    disp = [ax.transData.transform((x, y0))[0] for x, _ in ridges]
    inv = ax.transData.inverted()
    for (x, text), px in zip(ridges, _spread(disp, gap=11.0), strict=True):
        xl = inv.transform((px, ax.transData.transform((x, y0))[1]))[0]
        ax.annotate(text, (xl, 0.02), xycoords=("data", "axes fraction"), xytext=(-1.5, 0),
                    textcoords="offset points", rotation=90, ha="right", va="bottom", fontsize=7.5, color="#555")


def _draw_points(ax, best: pd.DataFrame, order: list[str], styles: dict, hacked: set[str]) -> None:
    """A marker per (candidate, workload); per candidate one trajectory per problem, low to high
    intensity. One artist per candidate and kind: a chart of every problem stays quick to draw."""
    for cand in order:
        c = best[best["solution"] == cand].sort_values(["problem", "arithmetic_intensity"])
        st = styles[cand]
        segments = [g[["arithmetic_intensity", "achieved_flops_per_s"]].to_numpy()
                    for _, g in c.groupby("problem", sort=False) if len(g) > 1]
        if segments:
            ax.add_collection(LineCollection(segments, colors=st.color, linewidths=1.1, alpha=0.55, zorder=4,
                                             linestyles=":" if cand in hacked else "-"))
        # A candidate caught reward hacking is drawn hollow: its numbers are not to be trusted.
        marks = ax.scatter(c["arithmetic_intensity"], c["achieved_flops_per_s"], marker=st.marker, s=42, zorder=5,
                           facecolors="white" if cand in hacked else st.color,
                           edgecolors=st.color if cand in hacked else "white", linewidths=1.2 if cand in hacked else 0.6)
        tooltips(ax.figure, marks, [_point_title(r) for r in c.to_dict("records")])
        noisy = c[c["noisy"].fillna("") != ""] if "noisy" in c.columns else c.iloc[:0]
        if len(noisy):  # a ring around a time too noisy to rank on
            ax.scatter(noisy["arithmetic_intensity"], noisy["achieved_flops_per_s"], **NOISY_RING)


# A time too noisy to rank on (solbench.data.noise): a dashed ring around its point, in every chart.
NOISY_RING = {"marker": "o", "s": 150, "facecolors": "none", "edgecolors": "#222", "linewidths": 1.0,
              "linestyles": "--", "zorder": 6}
NOISY_LABEL = "noisy timing (95% interval > 10%\nof the median, or p90 > 1.5x it)"


def _point_title(r: dict) -> str:
    """A point's hover text (SVG): what it is and its numbers."""
    text = (f"{one_line(r['problem'], 80)} · {one_line(r['workload'], 60)}\n{one_line(r['solution'], 60)}: "
            f"SOL {sol_text(r['sol'])}, {si(r['time_s'], 's')}, {si(r['achieved_flops_per_s'], 'FLOP/s')}, "
            f"{r['arithmetic_intensity']:.3g} FLOP/B")
    return text + (f"\n{r['noisy']}" if r.get("noisy") else "")


def _number_problems(ax, best: pd.DataFrame, problems: list[str]) -> None:
    """Several problems: each trajectory's high-intensity end carries the problem's number (see legend),
    the numbers pushed apart (and off the points and roof labels) with a leader line where moved far."""
    fig = ax.figure
    renderer = _renderer(fig)
    fixed = [t.get_window_extent(renderer).extents for t in ax.texts]  # roof and ridge labels, drawn already
    fontsize = 8 if len(problems) <= 20 else 6.5
    style = {"ha": "center", "va": "center", "fontsize": fontsize, "fontweight": "bold", "color": "#222", "zorder": 7,
             "bbox": {"boxstyle": "circle,pad=0.15", "fc": "white", "ec": "#888", "lw": 0.6}}
    ends = []
    for prob in problems:
        p = best[best["problem"] == prob]
        end = p[p["arithmetic_intensity"] == p["arithmetic_intensity"].max()]
        ends.append((float(end["arithmetic_intensity"].iloc[0]), float(end["achieved_flops_per_s"].max())))
    sizes = np.array([_label_size(ax, str(k), style, renderer) for k in range(1, len(problems) + 1)])
    anchors = ax.transData.transform(ends)
    points = ax.transData.transform(best[["arithmetic_intensity", "achieved_flops_per_s"]].to_numpy())
    centres = place_labels(anchors, sizes, points, np.array(fixed), tuple(ax.bbox.extents),
                           offset=float(sizes[:, 1].max()) * 0.5 + 5)
    to_points = 72 / fig.dpi
    for k, (end, anchor, centre, size) in enumerate(zip(ends, anchors, centres, sizes, strict=True), 1):
        far = np.hypot(*(centre - anchor)) > 0.9 * size.max()  # moved off its point: a line back to it
        ax.annotate(str(k), end, xytext=tuple((centre - anchor) * to_points), textcoords="offset points", **style,
                    arrowprops={"arrowstyle": "-", "color": "#777", "lw": 0.6, "shrinkA": 0, "shrinkB": 3,
                                "relpos": (0.5, 0.5)} if far else None)


def _label_size(ax, text: str, style: dict, renderer) -> np.ndarray:  # noqa: ANN001
    """A numbered label's size on the figure (pixels), measured by drawing it once."""
    mark = ax.annotate(text, (0.5, 0.5), xycoords="axes fraction", **style)
    mark.draw(renderer)  # the circle around the number is sized when drawn
    size = mark.get_bbox_patch().get_window_extent(renderer).size
    mark.remove()
    return size


def _renderer(fig: Figure):  # noqa: ANN202 - the backend's renderer type
    """A renderer to measure text with, before the figure is saved (Agg: what PNG output uses)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    return canvas.get_renderer()


def _legend(fig: Figure, order: list[str], styles: dict, roofs: list[Roof], hacked: set[str], top: float,
            problems: list[str], noisy: bool = False) -> None:
    handles = [Line2D([], [], color=styles[c].color, marker=styles[c].marker, lw=1.1, ms=7,
                      ls=":" if c in hacked else "-", markerfacecolor="white" if c in hacked else styles[c].color,
                      label=label(c, 34) + (" (REWARD_HACK)" if c in hacked else ""))
               for c in order]
    handles += [Line2D([], [], color="#333", ls=r.style, lw=1.4,
                       label=f"{r.kind} roof" + (" (as recorded)" if r.recovered else ""))
                for r in roofs]
    if noisy:
        handles.append(Line2D([], [], ls="none", marker="o", ms=11, mfc="none", mec="#222", label=NOISY_LABEL))
    handles += [Line2D([], [], ls="none", label=f"({k}) {label(p, 40)}") for k, p in enumerate(problems, 1)]
    # A long key (a library chart numbers 40+ problems) gets a smaller font to fit beside the axes.
    fontsize = 9 if len(handles) <= 26 else max(5.0, 9 * 26 / len(handles))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.70, top), frameon=False, fontsize=fontsize,
               title="candidate (a marker per workload)", alignment="left", title_fontsize=9,
               labelspacing=0.5 if len(handles) <= 26 else 0.25, handlelength=2.0)
