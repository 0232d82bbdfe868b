"""`solbench compare` (NEW against BASE, with significance, a CI gate) and `solbench history`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from solbench.cli._app import app
from solbench.cli._common import DEFAULT_RESULTS, ListFormat, console, done, err_console, load, warn
from solbench.cli.present import RESULTS_ARG, selecting
from solbench.errors import SolbenchError


class By(str, Enum):
    file = "file"
    candidate = "candidate"


VERDICT_STYLE = {"slower": "red", "faster": "green", "same": None}


def _output(text: str, json_out: bool, markdown: bool) -> None:
    if json_out and markdown:
        raise SolbenchError("--json and --markdown: pick one")
    typer.echo(text, nl=not text.endswith("\n"))


NAMES = ("problem", "workload", "GPU", "candidate")
NUMBERS = ("BASE", "NEW", "ratio", "95% CI", "p", "time", "SOL", "when", "version", "commit")


def _print_table(headers: tuple[str, ...], rows: list[list[str]], styles: list[str | None], title: str) -> None:
    """A terminal table; a name column with one value throughout moves to the title, and a series'
    names are written on its first row only (a terminal is narrow)."""
    keep = [i for i, h in enumerate(headers) if h not in ("GPU", "candidate") or len({r[i] for r in rows}) > 1]
    constant = [rows[0][i] for i, h in enumerate(headers) if i not in keep] if rows else []
    table = Table(title=Text(title + (f" · {' · '.join(constant)}" if constant else "")), box=box.SIMPLE_HEAD,
                  header_style="bold cyan", pad_edge=False)
    for i in keep:
        h = headers[i]
        table.add_column(h, justify="right" if h in NUMBERS[:7] else "left", no_wrap=h in NUMBERS,
                         overflow="fold")
    prev: list[str] = []
    for row, style in zip(rows, styles, strict=True):
        names = [row[i] for i in keep if headers[i] in NAMES]
        shown = ["" if headers[i] in NAMES and names == prev else row[i] for i in keep]
        prev = names
        table.add_row(*(Text(c) for c in shown), style=style)
    console.print(table)


@app.command()
def compare(
    base: str = typer.Argument(..., help="BASE: a results file or folder (--by file), or a candidate name (--by candidate)"),
    new: str = typer.Argument(..., help="NEW: as BASE"),
    by: By = typer.Option(By.file, "--by", help="file: BASE and NEW are result sets, pairs per candidate; "
                                                "candidate: BASE and NEW are candidates in --results"),
    results: list[Path] = typer.Option(None, "--results", help="with --by candidate: result files or folders "
                                                                 "[default: results/]"),
    json_out: bool = typer.Option(False, "--json", help="print an object with rows, summary, missing"),
    markdown: bool = typer.Option(False, "--markdown", help="print markdown"),
    fail_on_slower: float = typer.Option(None, "--fail-on-slower", min=0.0, metavar="PCT",
                                         help="exit 1 if a pair is significantly slower by more than PCT percent"),
    fail_on_missing: bool = typer.Option(False, "--fail-on-missing",
                                         help="exit 1 if a pair cannot be compared (e.g. NEW failed where BASE passed)"),
    min_effect: float = typer.Option(2.0, "--min-effect", min=0.0, max=99.0, metavar="PCT",
                                     help="smallest change in percent read as faster or slower"),
    alpha: float = typer.Option(0.05, "--alpha", help="significance level"),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=100, help="bootstrap resamples per pair"),
    problem: list[str] = typer.Option(None, "--problem", help="problem name or glob; repeatable"),
    gpu: list[str] = typer.Option(None, "--gpu", help="spec id or part of the device name; repeatable"),
) -> None:
    """Time ratio NEW/BASE per (problem, workload, GPU, candidate) with a 95% interval, a test and a
    verdict faster/slower/same; geometric mean per candidate; pairs found on one side listed."""
    from solbench.present import compare as cmp

    if by == By.file:
        if results:
            raise SolbenchError("--results goes with --by candidate; with --by file, BASE and NEW are the results")
        for label, value in (("BASE", base), ("NEW", new)):
            if not Path(value).exists():
                raise SolbenchError(f"{label} {value}: no such results file or folder; to compare two candidates "
                                    "of one result set, pass --by candidate")
        frames = (load([Path(base)]), load([Path(new)]))
    else:
        df = load(results or [DEFAULT_RESULTS])
        frames = (df, df)
    result = cmp.compare_frames(*frames, by=by.value, base_name=base, new_name=new, min_effect=min_effect / 100.0,
                                alpha=alpha, n_boot=bootstrap, problems=problem or (), gpus=gpu or ())
    if json_out or markdown:
        _output(cmp.to_json(result) if json_out else cmp.to_markdown(result), json_out, markdown)
    else:
        _print_compare(result)
    _gate(result, fail_on_slower, fail_on_missing)


def _print_compare(result) -> None:
    from solbench.present import compare as cmp

    _print_table(cmp.HEADERS, [cmp.row_cells(r) for r in result.rows],
                 [VERDICT_STYLE[r.comparison.verdict] for r in result.rows],
                 f"{result.new} against {result.base} (ratio = NEW/BASE time)")
    for s in result.summary:
        console.print(Text(cmp.summary_line(s)))
    for m in result.missing:
        err_console.print(Text(f"not compared: {cmp.missing_line(m)}", style="yellow"), soft_wrap=True)
    console.print(Text(f"verdict: p < {result.alpha:g} and at least {result.min_effect * 100:g}% away from 1 "
                       "(docs/compare.md)", style="dim"))


def _gate(result, fail_on_slower: float | None, fail_on_missing: bool) -> None:
    """Exit 1 when the CI gate trips, naming each pair that trips it (on stderr)."""
    from solbench.present import compare as cmp

    tripped = [f"slower by more than {fail_on_slower:g}%: " + " ".join(cmp.row_cells(r)[:4]) +
               f" ratio {r.comparison.ratio:.3f}" for r in result.slower_than(fail_on_slower)] \
        if fail_on_slower is not None else []
    if fail_on_missing:
        tripped += [f"not compared: {cmp.missing_line(m)}" for m in result.missing
                    if m["reason"] != "no record in BASE"]  # a workload new in NEW is no regression
    for line in tripped:
        err_console.print(Text(f"FAIL {line}", style="red"), soft_wrap=True)
    if tripped:
        raise typer.Exit(1)


@app.command()
@selecting
def history(
    results: list[Path] = RESULTS_ARG,
    fmt: ListFormat = typer.Option(ListFormat.table, "--format", "-f", help="output format"),
    chart: Path = typer.Option(None, "--chart", "-o", help="also write the trend chart (.png, .svg or .pdf)"),
    min_effect: float = typer.Option(2.0, "--min-effect", min=0.0, max=99.0, metavar="PCT",
                                     help="smallest change in percent marked as a change point"),
    alpha: float = typer.Option(0.05, "--alpha", help="significance level"),
    min_runs: int = typer.Option(1, "--min-runs", min=1, help="show series with at least this many runs"),
    *,
    selection,
) -> None:
    """A candidate's time and SOL run after run (with its git commit and the solbench version);
    significant changes from one run to the next are marked."""
    from solbench.present import history as hist
    from solbench.present import save

    h = hist.result_history(load(results), selection, min_effect=min_effect / 100.0, alpha=alpha,
                            min_points=min_runs)
    warn(h.warnings)
    if not h.series:
        raise SolbenchError(f"no series with {min_runs} run(s) or more: lower --min-runs or pass more results")
    if fmt == ListFormat.table:
        rows = hist.history_rows(h)
        styles = [{"slower": "red", "faster": "green"}.get(p.change.verdict) if p.is_change else None
                  for s in h.series for p in s.points]
        _print_table(hist.HEADERS, rows, styles, f"History: {len(h.series)} series, "
                                                 f"{len(h.change_points())} change point(s)")
    else:
        text = hist.to_markdown(h) if fmt == ListFormat.markdown else hist.to_json(h)
        typer.echo(text, nl=not text.endswith("\n"))
    if chart is not None:
        done("chart", save(hist.history_figure(h), chart))
