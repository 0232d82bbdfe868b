"""The leaderboard in each output format: rich table, markdown, csv, html, json.

Every format shows the same rows. Text formats take their cells from :func:`display_tables`, so a
number reads the same in the terminal, in markdown and in the HTML report. Record text (names, notes,
warnings) is cleaned of control characters and cut to one line in every format (JSON escapes it);
HTML is also autoescaped. Every format says what it does not show (``Leaderboard.notes``).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Literal

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from solbench.present.frame import FAILURE_STATUSES, STATUS_SHORT
from solbench.present.markup import fmt_share, markdown_cell, markdown_text, one_line, render, spreadsheet_safe
from solbench.present.ranking import Leaderboard
from solbench.units import sol_text

Format = Literal["table", "markdown", "csv", "html", "json"]
FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "html", "json")

PROBLEM_HEADERS = ("Rank", "Candidate", "Passed", "Geomean SOL", "Worst SOL", "Failures", "Note")
OVERALL_HEADERS = ("Rank", "Candidate", "Problems", "Workloads", "Geomean SOL", "SOL≥0.5", "SOL≥0.8", "Failures",
                   "Note")
ATTAINABLE = "Attainable SOL"  # geomean SOL against max(T_ideal, launch floor); shown when a workload is under it
BEST_KNOWN, GAP = "Best known", "Gap"  # the best library baseline's geomean SOL; SOL / that, per workload
NUMERIC_HEADERS = ("Rank", "Geomean SOL", ATTAINABLE, "Worst SOL", BEST_KNOWN, GAP, "SOL≥0.5", "SOL≥0.8")
# Narrower headers for a terminal (80 columns must hold the overall table).
TERMINAL_HEADERS = {"Rank": "#", "Geomean SOL": "SOL gm", ATTAINABLE: "att. gm", "Worst SOL": "SOL min", "SOL≥0.5": "≥0.5", "SOL≥0.8": "≥0.8",
                    "Problems": "Probs", "Workloads": "Wklds", BEST_KNOWN: "best", GAP: "gap"}


@dataclass
class DisplayTable:
    """One ranking, as display strings. ``kind`` 'problem' or 'overall'; ``hacked`` marks rows."""

    title: str
    kind: str
    problem: str | None
    gpu: str
    headers: tuple[str, ...]
    rows: list[list[str]]
    hacked: list[bool]


def _failures(row: dict, short: bool = False) -> str:
    return ", ".join(f"{STATUS_SHORT[s] if short else s} {int(row[s])}" for s in FAILURE_STATUSES if row[s]) or "-"


def _rank(v: object) -> str:
    return "-" if pd.isna(v) else str(int(v))


def display_tables(lb: Leaderboard, short: bool = False) -> list[DisplayTable]:
    """Per-problem rankings (problem, then GPU), then the overall ranking per GPU. ``short``
    abbreviates the failure statuses (for a terminal)."""
    out = []
    for (prob, gpu), g in lb.problems.groupby(["problem", "gpu"], sort=True):
        rows = [[_rank(r["rank"]), one_line(r["candidate"]), f"{r['workloads_passed']}/{r['workloads_total']}",
                 sol_text(r["geomean_sol"]), sol_text(r["min_sol"]), _failures(r, short), one_line(r["note"])]
                for r in g.to_dict("records")]
        out.append(DisplayTable(_title(prob, gpu, lb), "problem", prob, gpu, PROBLEM_HEADERS, rows,
                                g["disqualified"].tolist()))
    for gpu, g in lb.overall.groupby("gpu", sort=True):
        rows = [[_rank(r["rank"]), one_line(r["candidate"]), f"{r['problems_passed']}/{r['problems_attempted']}",
                 f"{r['workloads_passed']}/{r['workloads_attempted']}", sol_text(r["geomean_sol"]),
                 fmt_share(r["share_sol_ge_0_5"]), fmt_share(r["share_sol_ge_0_8"]), _failures(r, short),
                 one_line(r["note"])]
                for r in g.to_dict("records")]
        out.append(DisplayTable(_title("Overall", gpu, lb), "overall", None, gpu, OVERALL_HEADERS, rows,
                                g["disqualified"].tolist()))
    out = _with_attainable(out, lb) if lb.under_floor else out
    return _with_best_known(out, lb) if lb.problems["best_known_sol"].notna().any() else out


def _with_best_known(tables: list[DisplayTable], lb: Leaderboard) -> list[DisplayTable]:
    """Per-problem tables with the best library baseline's geomean SOL and each candidate's gap to it
    (SOL / best-known SOL, geomean over the workloads both passed); baselines say so in the note."""
    frames = {(p, g): grp for (p, g), grp in lb.problems.groupby(["problem", "gpu"], sort=True)}
    for t in tables:
        if t.kind != "problem":
            continue
        grp = frames[(t.problem, t.gpu)]
        at = t.headers.index("Worst SOL") + 1
        t.headers = (*t.headers[:at], BEST_KNOWN, GAP, *t.headers[at:])
        cells = zip(grp["best_known_sol"], grp["gap_to_best_known"], grp["baseline"], strict=True)
        t.rows = [[*row[:at], sol_text(k), _gap_text(g), *row[at:-1], _baseline_note(row[-1], b)]
                  for row, (k, g, b) in zip(t.rows, cells, strict=True)]
    return tables


def _gap_text(gap: float) -> str:
    return "-" if pd.isna(gap) else f"{gap:.2f}x"


def _baseline_note(note: str, library: str) -> str:
    if not library:
        return note
    return f"baseline ({one_line(library, 60)})" + (f"; {note}" if note else "")


def _with_attainable(tables: list[DisplayTable], lb: Leaderboard) -> list[DisplayTable]:
    """Each table with the geomean attainable SOL beside the geomean SOL (same row order as built)."""
    frames = {("problem", p, g): grp for (p, g), grp in lb.problems.groupby(["problem", "gpu"], sort=True)}
    frames.update({("overall", None, g): grp for g, grp in lb.overall.groupby("gpu", sort=True)})
    for t in tables:
        at = t.headers.index("Geomean SOL") + 1
        values = frames[(t.kind, t.problem, t.gpu)]["geomean_attainable_sol"].tolist()
        t.headers = (*t.headers[:at], ATTAINABLE, *t.headers[at:])
        t.rows = [[*row[:at], sol_text(v), *row[at:]] for row, v in zip(t.rows, values, strict=True)]
    return tables


def attainable_note(lb: Leaderboard) -> str:
    """What the attainable column means, for every format that shows it ('' when none does)."""
    if not lb.under_floor:
        return ""
    return (f"{ATTAINABLE}: SOL against max(T_ideal, launch floor), the least time the timer reads for an empty "
            f"call; {lb.under_floor} result(s) have T_ideal below that floor. SOL stays the score.")


def _title(what: str, gpu: str, lb: Leaderboard) -> str:
    return f"{one_line(what, 120)} on {one_line(gpu, 60)} ({one_line(lb.roof_of(gpu), 40)} roof)"


def print_leaderboard(lb: Leaderboard, console: Console | None = None, *, notes: bool = True) -> None:
    """Rich tables on the terminal. Cells are Text objects: record text is never parsed as markup.
    ``notes``: end with what is not shown and the reading warnings (the CLI prints those itself)."""
    console = console or Console()
    for t in display_tables(lb, short=True):
        table = Table(title=Text(t.title), title_style="bold", header_style="bold cyan", box=box.SIMPLE_HEAD,
                      pad_edge=False)
        for h in t.headers:
            numeric = h in NUMERIC_HEADERS or h in ("Passed", "Problems", "Workloads")
            table.add_column(TERMINAL_HEADERS.get(h, h), justify="right" if numeric else "left", no_wrap=numeric,
                             overflow="ellipsis" if h == "Candidate" else "fold",
                             min_width=12 if h == "Candidate" else None, max_width=36 if h == "Candidate" else None)
        for row, hacked in zip(t.rows, t.hacked, strict=True):
            style = "red" if hacked else ("dim" if row[0] == "-" else None)
            cells = [*row[:-1], row[-1].replace(": not ranked", "")]  # the style already says it
            table.add_row(*(Text(c) for c in cells), style=style)
        console.print(table)
    console.print(Text("Failures: " + ", ".join(f"{v} = {k}" for k, v in STATUS_SHORT.items()) +
                       f". SOL against {lb.roof_phrase}; ranked: no failure first, then passed, then geomean SOL.", style="dim"))
    if attainable_note(lb):
        console.print(Text(attainable_note(lb), style="dim"))
    for w in lb.notes if notes else ():
        console.print(Text(f"warning: {one_line(w, 300)}", style="yellow"))


MARKDOWN_NOTES = 20  # notes listed under a markdown leaderboard; the rest are counted


def to_markdown(lb: Leaderboard) -> str:
    parts = [f"# Leaderboard ({markdown_text(lb.roof)} roof)", ""]
    if len(set(lb.roofs.values())) > 1:
        parts += [f"SOL against {markdown_text(lb.roof_phrase)}.", ""]
    if attainable_note(lb):
        parts += [markdown_text(attainable_note(lb)), ""]
    for t in display_tables(lb):
        parts += [f"## {markdown_cell(t.title)}", "", "| " + " | ".join(t.headers) + " |",
                  "|" + "|".join(" ---: " if h == "Rank" else " --- " for h in t.headers) + "|"]
        parts += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in t.rows]
        parts.append("")
    if lb.notes:
        parts += ["## Not shown", ""]
        parts += [f"- {markdown_text(w)}" for w in lb.notes[:MARKDOWN_NOTES]]
        if len(lb.notes) > MARKDOWN_NOTES:
            parts.append(f"- ... and {len(lb.notes) - MARKDOWN_NOTES} more")
        parts.append("")
    return "\n".join(parts)


def to_csv(lb: Leaderboard) -> str:
    """One tidy table: ``scope`` is 'problem' or 'overall'; columns a scope lacks are empty."""
    frames = [lb.problems.assign(scope="problem"), lb.overall.assign(scope="overall")]
    df = pd.concat(frames, ignore_index=True)
    df["roof"] = df["gpu"].map(lb.roof_of)
    first = ["scope", "roof", "gpu", "problem", "rank", "candidate"]
    df = df[first + [c for c in df.columns if c not in first]]
    ints = [c for c in ("rank", "workloads_total", "problems_passed", "problems_attempted", "workloads_attempted")
            if c in df.columns]
    df[ints] = df[ints].astype("Int64")
    df = df.map(lambda v: spreadsheet_safe(one_line(v, 1000)) if isinstance(v, str) else v)
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue()


def to_json(lb: Leaderboard) -> str:
    return json.dumps(lb.to_dict(), indent=2)


def to_html(lb: Leaderboard, title: str = "solbench leaderboard") -> str:
    """A standalone page (inline CSS, no scripts, no external resources)."""
    return render("leaderboard.html.j2", title=one_line(title), roof_phrase=lb.roof_phrase, tables=display_tables(lb),
                  warnings=[one_line(w, 300) for w in lb.notes])


def format_leaderboard(lb: Leaderboard, fmt: str) -> str:
    """The leaderboard as text in ``fmt`` (every format but 'table', which prints: see print_leaderboard)."""
    renderers = {"markdown": to_markdown, "csv": to_csv, "json": to_json, "html": to_html}
    if fmt not in renderers:
        from solbench.errors import SolbenchError

        raise SolbenchError(f"--format {fmt!r}: pick one of {', '.join(FORMATS)}")
    return renderers[fmt](lb)
