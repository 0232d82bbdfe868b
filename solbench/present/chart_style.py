"""What the charts share: candidate colours and markers, label cleaning, the footnote, saving.

Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot): no global state, no GUI
backend, nothing left open, so a long report or a server can make thousands of them.
"""

from __future__ import annotations

import base64
import contextlib
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure

from solbench.errors import SolbenchError
from solbench.present.markup import clean_text, one_line
from solbench.present.svg_marks import has_tooltips, with_titles

FIXED_LAYOUT = "solbench:fixed-layout"  # Figure label of charts whose layout needs no "tight" pass
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
# The record columns the charts read (a worker process drawing a chart gets only these).
CHART_COLUMNS = ("problem", "workload", "solution", "status", "gpu", "gpu_spec", "roof", "device", "compute_dtype",
                 "arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "sol", "time_s", "flops",
                 "bytes", "t_ideal_s", "t_compute_s", "t_memory_s", "bound", "timestamp", "timestamp_utc",
                 "timing.method", "solbench_version", "noisy")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
RC = {"font.size": 10, "axes.titlesize": 12, "axes.labelsize": 10.5, "legend.fontsize": 9,
      "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.grid": True,
      "grid.alpha": 0.3, "figure.dpi": 100}


@dataclass(frozen=True)
class Style:
    color: str
    marker: str


_PALETTE: dict[str, Style] = {}  # set by ``palette_for``: every chart drawn meanwhile uses it


def _styles(candidates: Sequence[str]) -> dict[str, Style]:
    cmap = mpl.colormaps["tab10" if len(candidates) <= 10 else "tab20"]
    n = cmap.N
    return {c: Style(mpl.colors.to_hex(cmap(i % n)), MARKERS[i % len(MARKERS)]) for i, c in enumerate(candidates)}


def candidate_styles(candidates: Sequence[str]) -> dict[str, Style]:
    """A distinct colour and marker per candidate: from the palette in force (:func:`palette_for`)
    when it holds them all, so a candidate keeps its colour from chart to chart; else by this order."""
    if _PALETTE and all(c in _PALETTE for c in candidates):
        return {c: _PALETTE[c] for c in candidates}
    return _styles(candidates)


@contextlib.contextmanager
def palette_for(candidates: Iterable[str]) -> Iterator[None]:
    """Within the block, each candidate has one colour and marker in every chart (assigned by name
    over all of ``candidates``: the whole result set of a report or a plot command)."""
    global _PALETTE
    saved, _PALETTE = _PALETTE, _styles(sorted({str(c) for c in candidates}))
    try:
        yield
    finally:
        _PALETTE = saved


def label(text: object, limit: int = 40) -> str:
    """Text from a record, safe for matplotlib: no control characters, no mathtext ($), bounded."""
    s = " ".join(clean_text(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("$", r"\$")


def candidate_order(records: pd.DataFrame) -> list[str]:
    """Candidates best first: most workloads passed, then highest median SOL; then the rest by name."""
    passed = records[records["status"] == "PASSED"]
    stats = passed.groupby("solution")["sol"].agg(["size", "median"])
    ranked = sorted(stats.index, key=lambda c: (-stats.loc[c, "size"], -stats.loc[c, "median"], c))
    rest = sorted(set(records["solution"]) - set(ranked))
    return [*ranked, *rest]


def footnote(records: pd.DataFrame, roof: str, extra: Sequence[str] = ()) -> str:
    """Device, timer, roof, the results' dates and versions: what a reader needs to trust the chart."""
    def values(col: str) -> str:
        if col not in records.columns:
            return "not recorded"
        v = sorted({str(x) for x in records[col].dropna()})
        return ", ".join(label(x, 60) for x in v[:3]) + (f" (+{len(v) - 3})" if len(v) > 3 else "") or "not recorded"

    ts = records["timestamp_utc"].dropna() if "timestamp_utc" in records.columns else pd.Series(dtype=object)
    if len(ts):
        first, last = ts.min().strftime("%Y-%m-%d %H:%M"), ts.max().strftime("%Y-%m-%d %H:%M")
        when = first if first == last else f"{first} to {last}"
        when += " UTC"
    else:
        when = "unknown"
    parts = [f"device: {values('device')}", f"timer: {values('timing.method')}", f"SOL vs {roof} roof",
             f"results: {when}", f"solbench {values('solbench_version')}", *extra]
    return "  ·  ".join(parts)


FOOTNOTE_NOTES = 3  # notes of left-out records on a chart; the rest are counted


def footnote_notes(notes: Sequence[str]) -> list[str]:
    """What the selection left out, as footnote parts (cleaned, at most FOOTNOTE_NOTES and a count)."""
    parts = [label(n, 160) for n in notes[:FOOTNOTE_NOTES]]
    if len(notes) > FOOTNOTE_NOTES:
        parts.append(f"{len(notes) - FOOTNOTE_NOTES} more left out")
    return parts


def output_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise SolbenchError(f"{path}: unknown chart format {suffix or '(none)'}: use a .png, .svg or .pdf file name")
    return FORMATS[suffix]


def _tight(fig: Figure) -> str | None:
    # A figure laid out by hand (the roofline) skips the "tight" pass: it costs a whole extra draw.
    return None if fig.get_label() == FIXED_LAYOUT else "tight"


def save(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write by suffix (PNG, SVG or PDF), creating the folder."""
    path = Path(path)
    fmt = output_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "svg" and has_tooltips(fig):  # a <title> per point: the SVG is rewritten, so written once here
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches=_tight(fig), pad_inches=0.15, metadata={"Date": None})
        path.write_bytes(with_titles(buf.getvalue(), fig))
        return path
    fig.savefig(path, format=fmt, dpi=dpi, bbox_inches=_tight(fig), pad_inches=0.15,
                metadata={"Date": None} if fmt == "svg" else None)
    return path


def to_bytes(fig: Figure, fmt: str = "svg", dpi: int = 110) -> bytes:
    """The figure as image bytes. SVG text stays text (``svg.fonttype: none``): a third of the size,
    faster to write, and the browser draws it crisply; no script can hide in it inside an <img>."""
    buf = io.BytesIO()
    with mpl.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches=_tight(fig), pad_inches=0.15,
                    metadata={"Date": None} if fmt == "svg" else None)
    return with_titles(buf.getvalue(), fig) if fmt == "svg" else buf.getvalue()


MIME = {"svg": "image/svg+xml", "png": "image/png"}


def data_uri(fig: Figure, fmt: str = "svg") -> str:
    """The figure as a ``data:`` URI (SVG or PNG) for an ``<img>`` of a self-contained HTML page."""
    return f"data:{MIME[fmt]};base64," + base64.b64encode(to_bytes(fig, fmt)).decode("ascii")


def single_gpu(records: pd.DataFrame) -> str:
    """The one GPU these records are from; a chart is per GPU."""
    gpus = sorted(records["gpu"].dropna().unique())
    if len(gpus) != 1:
        shown = ", ".join(one_line(g, 60) for g in gpus[:12]) + (f" and {len(gpus) - 12} more" if len(gpus) > 12 else "")
        raise SolbenchError(f"these results span {len(gpus)} GPUs ({shown}): a chart is per GPU, pass --gpu ID")
    return gpus[0]
