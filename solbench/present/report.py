"""The HTML report: one self-contained file with the leaderboard, a section per problem (charts and
a workloads x candidates table), the environment, the timing method and every failure.

Charts are inline SVG by default (each point's ``<title>`` shows on hover; the SVG is rebuilt from an
allow-list of drawing elements, :mod:`solbench.present.svg_marks`) or PNG ``data:`` URIs on request:
the file needs nothing else, fetches nothing, and runs no script (see :mod:`solbench.present.markup`).
"""

from __future__ import annotations

import datetime as _dt
import multiprocessing
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Literal

import pandas as pd
from rich.console import Console

from solbench._version import __version__
from solbench.errors import SolbenchError
from solbench.present.chart_style import CHART_COLUMNS, data_uri, palette_for, save, to_bytes
from solbench.present.frame import Selection, load_results
from solbench.present.leaderboard import attainable_note, display_tables, print_leaderboard
from solbench.present.markup import one_line, render
from solbench.present.ranking import Leaderboard, leaderboard
from solbench.present.report_data import environment_rows, failures, problem_sections, timing_rows
from solbench.present.report_models import model_sections
from solbench.present.report_profiles import profile_tables
from solbench.present.report_sections import compare_section, history_section
from solbench.present.roofline_chart import roofline_figure
from solbench.present.svg_marks import inline_svg

ChartFormat = Literal["svg", "png", "none"]
PARALLEL_FROM = 6  # charts per extra worker process (below that, starting processes costs more than it saves)


CAPTIONS = {
    "roofline": ("roofline chart", "Roofline: achieved FLOP/s against arithmetic intensity; the line joins each "
                 "candidate's workloads from low to high intensity."),
    "overview": ("roofline of all problems", "All problems on one GPU, one trajectory per problem and candidate "
                 "(each numbered at its high-intensity end; the key beside the chart names them)."),
}


def _chart_uri(job: tuple[str, pd.DataFrame, str], number: int = 0) -> str:
    """One chart: inline SVG markup (its points' ``<title>`` tooltips work only inline), or a PNG as a
    data: URI. A top-level function so a process pool can run it."""
    kind, records, fmt = job
    fig = roofline_figure(records)
    if fmt == "svg":
        return inline_svg(to_bytes(fig, fmt), f"chart{number}", CAPTIONS[kind][0])
    return data_uri(fig, fmt)


def _has_roofline(records: pd.DataFrame) -> bool:
    """A roofline needs a PASSED result that does FLOPs (pure data movement has none to plot)."""
    ok = (records["status"] == "PASSED") & (records["flops"] > 0) & (records["achieved_flops_per_s"] > 0)
    return bool(ok.any())


def _render(jobs: list[tuple[str, pd.DataFrame, str]], workers: int | None) -> list[str]:
    """Charts are most of a report's time: draw them in parallel processes when there are many."""
    if workers is None:
        workers = min(os.cpu_count() or 1, 16, len(jobs) // PARALLEL_FROM)
    slim = [(k, r[[c for c in CHART_COLUMNS if c in r.columns]], f) for k, r, f in jobs]  # less to copy
    # fork, where it is safe: spawn would re-run the caller's main script in every worker. A process
    # with other Python threads is not safe to fork, so it draws in-process.
    if workers > 1 and sys.platform == "linux" and threading.active_count() == 1:
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                return list(pool.map(_chart_uri, slim, range(len(slim))))
        except (OSError, BrokenProcessPool):
            pass  # no processes to be had here: draw them one by one
    return [_chart_uri(j, i) for i, j in enumerate(slim)]


def build_report(results: pd.DataFrame, selection: Selection | None = None, *, title: str | None = None,
                 charts: ChartFormat = "svg", sources: Sequence[str] = (), workers: int | None = None,
                 baseline: pd.DataFrame | None = None) -> str:
    """The report's HTML text (see :func:`write_report`) of the records (a DataFrame from
    :func:`solbench.load_results`) that ``selection`` keeps. ``sources``: where they were read from,
    shown on the page. ``workers``: processes drawing the charts (default: one per CPU, up to 16,
    when there are many charts; 1 draws them here). ``baseline``: records to compare these with
    (a Comparison section, as ``solbench compare``); a History section appears by itself when a
    candidate has two runs or more of a workload."""
    if charts not in ("svg", "png", "none"):
        raise SolbenchError(f"--charts {charts!r}: pick svg, png or none")
    lb = leaderboard(results, selection)
    sections = problem_sections(lb)
    jobs: list[tuple[str, pd.DataFrame, str]] = []
    owners: list[list[tuple[str, str, str]]] = []  # where each chart goes
    overview: list[tuple[str, str, str]] = []
    if charts != "none":
        groups = dict(iter(lb.records.groupby(["problem", "gpu"], sort=True)))
        for s in sections:
            recs = groups[s.key]
            if not _has_roofline(recs):
                s.note = ("No roofline: no PASSED result here does FLOPs (a problem that only moves data is "
                          "judged by bandwidth: see the SOL and TB/s columns).")
            # One chart per section: the roofline. SOL per cell is drawn as a bar in the table (CSS),
            # which costs nothing; a chart per section is what a large report spends its time on.
            kinds = ("roofline",) if _has_roofline(recs) else ()
            for kind in kinds:
                jobs.append((kind, recs, charts))
                owners.append(s.charts)
        if lb.records["problem"].nunique() > 1:
            for _, recs in lb.records.groupby("gpu", sort=True):
                if _has_roofline(recs):
                    jobs.append(("overview", recs, charts))
                    owners.append(overview)
    with palette_for(lb.records["solution"]):  # a candidate keeps its colour in every chart (forked workers too)
        uris = _render(jobs, workers)
    for (kind, recs, _), owner, uri in zip(jobs, owners, uris, strict=True):
        alt, caption = CAPTIONS[kind]
        owner.append((uri, f"{alt}: {one_line(recs['gpu'].iloc[0])}", caption))
    failed, n_failed = failures(lb.records)
    profiled = profile_tables(lb.records, charts)  # `solbench profile` records: utilization, diagnosis, levels
    counts = lb.records["status"].value_counts()
    return render(
        "report.html.j2",
        title=one_line(title or "solbench report"),
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__,
        roof_phrase=lb.roof_phrase,
        sources=[one_line(s, 200) for s in sources],
        n_records=len(lb.records),
        status_counts=[(s, int(n)) for s, n in counts.items()],
        overall=[t for t in display_tables(lb) if t.kind == "overall"],
        overview=overview,
        sections=sections,
        environment=environment_rows(lb.records),
        timing=timing_rows(lb.records),
        failures=failed,
        n_failures=n_failed,
        warnings=[one_line(w, 300) for w in lb.notes],
        models=model_sections(lb.records, charts),
        attainable_note=attainable_note(lb),
        history=history_section(results, selection, charts),
        comparison=compare_section(baseline, lb.records) if baseline is not None else None,
        profiles={s.anchor: profiled[s.key] for s in sections if s.key in profiled},
    )


def write_report(results: pd.DataFrame, output: str | Path, selection: Selection | None = None,
                 **options: object) -> Path:
    """Write the self-contained HTML report of the selected records to ``output``. Options
    (``title``, ``charts``, ``sources``, ``workers``) as :func:`build_report`."""
    output = Path(output)
    html = build_report(results, selection, **options)  # type: ignore[arg-type]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html, encoding="utf-8")
    return output


def present_demo(records_path: str | Path, out_dir: str | Path, console: Console | None = None) -> dict[str, Path]:
    """The end of ``solbench demo``: the leaderboard on the terminal, a roofline PNG and the report.

    Returns the paths written: ``{"roofline": ..., "report": ...}`` (the roofline is of the GPU with
    the most records when the results span several). The demo's one results file is read here, once.
    """
    console = console or Console()
    out_dir = Path(out_dir)
    df = load_results([records_path], warn=False)
    lb: Leaderboard = leaderboard(df)
    print_leaderboard(lb, console)
    paths: dict[str, Path] = {}
    records = lb.records
    gpu = records["gpu"].value_counts().idxmax()
    one_gpu = records[records["gpu"] == gpu]
    if (one_gpu["status"] == "PASSED").any():
        with palette_for(records["solution"]):
            paths["roofline"] = save(roofline_figure(one_gpu), out_dir / "roofline.png")
    paths["report"] = write_report(df, out_dir / "report.html", sources=[str(records_path)])
    for name, p in paths.items():
        console.print(f"{name}: {p}", markup=False, highlight=False)
    return paths
