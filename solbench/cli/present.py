"""Commands over result records: leaderboard, plot (roofline, sol), report.

Each reads its files once (``_load``) and builds one Selection from the filter flags (``selecting``).
pandas and matplotlib are imported inside the commands, so other commands start without them.

Nothing is dropped silently: every line skipped while reading and every group of records the filters
matched but the output does not show (another roof of a GPU) is one ``warning: ...`` line on stderr
(the first ``MAX_WARNINGS_SHOWN``, then a count); HTML, JSON and markdown output list them too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from solbench.cli._app import app
from solbench.cli._common import DEFAULT_RESULTS, console, done, load, warn

if TYPE_CHECKING:
    from solbench.present import Selection

plot_app = typer.Typer(help="Charts of result records (PNG, SVG or PDF by the output's suffix).",
                       no_args_is_help=True)
app.add_typer(plot_app, name="plot")


class BoardFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    html = "html"
    json = "json"


class ChartFormat(str, Enum):
    svg = "svg"
    png = "png"
    none = "none"


RESULTS_ARG = typer.Argument(None, help="result files (.jsonl) or folders of them [default: results/]")
# The filter flags, declared once: every results command takes them (see ``selecting``) as one Selection.
FILTERS: dict[str, tuple[Any, Any]] = {
    "problem": (list[str], typer.Option(None, "--problem", help="problem name or glob (llama3_1_8b.*); repeatable")),
    "gpu": (list[str], typer.Option(None, "--gpu", help="spec id (h200_sxm) or part of the device name; repeatable")),
    "tag": (list[str], typer.Option(None, "--tag", help="keep problems with this tag; repeatable")),
    "candidate": (list[str], typer.Option(None, "--candidate", help="candidate name or glob; repeatable")),
    "roof": (str, typer.Option(None, "--roof", help="datasheet, measured or estimate (a CPU without a measured "
                                                     "spec): the roof SOL is computed against, one per GPU "
                                                     "(default: each GPU's datasheet, else measured, else estimate)")),
}


def selecting(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the filter flags added to its options; it receives them as ``selection``."""
    own = [p for p in inspect.signature(command).parameters.values() if p.name != "selection"]
    flags = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
             for name, (kind, option) in FILTERS.items()]

    @functools.wraps(command)
    def with_selection(**kwargs: Any) -> None:
        from solbench.present import Selection

        selection = Selection(**{name: kwargs.pop(name) for name in FILTERS})
        command(**kwargs, selection=selection)

    with_selection.__signature__ = inspect.Signature([*own, *flags])  # type: ignore[attr-defined]
    with_selection.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != "selection"},
                                      **{name: kind for name, (kind, _) in FILTERS.items()}}
    return with_selection


def _warn_left_out(df, selection: Selection) -> None:
    """What the selection matched but the output will not show (another roof of a GPU)."""
    from solbench.present import select_records

    warn(select_records(df, selection)[1])


@app.command()
@selecting
def leaderboard(
    results: list[Path] = RESULTS_ARG,
    fmt: BoardFormat = typer.Option(BoardFormat.table, "--format", "-f", help="output format"),
    output: Path = typer.Option(None, "--output", "-o", help="write to this file instead of the terminal"),
    *,
    selection: Selection,
) -> None:
    """Rank candidates per problem and GPU (workloads passed, then geomean SOL), and overall."""
    from solbench.present import format_leaderboard, print_leaderboard, ranking

    lb = ranking.leaderboard(load(results), selection)
    warn(lb.left_out)
    if fmt == BoardFormat.table and output is None:
        print_leaderboard(lb, console, notes=False)  # said on stderr already
        return
    text = format_leaderboard(lb, "markdown" if fmt == BoardFormat.table else fmt.value)
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    done("leaderboard", output)


def _plot_command(kind: str, what: str, doc: str) -> None:
    """Register ``solbench plot KIND``: the chart commands share their arguments and differ in the chart."""

    def command(
        results: list[Path] = RESULTS_ARG,
        output: Path = typer.Option(..., "--output", "-o", help="chart file: .png, .svg or .pdf"),
        title: str = typer.Option(None, "--title", help="chart title [default: what and on which GPU]"),
        *,
        selection: Selection,
    ) -> None:
        from solbench.present import plots

        plot = getattr(plots, f"plot_{kind}")
        df = load(results)
        _warn_left_out(df, selection)
        done(what, plot(df, output, selection, title=title))

    command.__doc__ = doc
    plot_app.command(kind)(selecting(command))


def _roofline(
    results: list[Path] = RESULTS_ARG,
    output: Path = typer.Option(..., "--output", "-o", help="chart file: .png, .svg or .pdf"),
    title: str = typer.Option(None, "--title", help="chart title [default: what and on which GPU]"),
    levels: bool = typer.Option(False, "--levels", help="hierarchical roofline: each kernel profiled by `solbench "
                                                       "profile` at HBM, L2 and L1, under each level's bandwidth"),
    *,
    selection: Selection,
) -> None:
    """Roofline chart: achieved FLOP/s against arithmetic intensity under the GPU's roofs (one GPU)."""
    from solbench.present import plots

    df = load(results)
    _warn_left_out(df, selection)
    done("hierarchical roofline" if levels else "roofline",
          plots.plot_roofline(df, output, selection, title=title, levels=levels))


plot_app.command("roofline")(selecting(_roofline))
_plot_command("sol", "SOL chart",
              "SOL bars per candidate and workload, one panel per problem; hatched = memory-bound (one GPU).")


@app.command()
@selecting
def report(
    results: list[Path] = RESULTS_ARG,
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="the HTML file to write"),
    title: str = typer.Option(None, "--title", help="page title"),
    charts: ChartFormat = typer.Option(ChartFormat.svg, "--charts", help="inline charts as svg, png, or none"),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="processes drawing charts [default: per CPU]"),
    baseline: list[Path] = typer.Option(None, "--baseline", help="results to compare these with (a Comparison "
                                                                 "section, as `solbench compare`); repeatable"),
    *,
    selection: Selection,
) -> None:
    """One self-contained HTML page: leaderboard, a section per problem, environment, failures."""
    from solbench.present import write_report

    sources = [str(p) for p in results or [DEFAULT_RESULTS]]
    df = load(results)
    _warn_left_out(df, selection)
    base = load(baseline) if baseline else None
    path = write_report(df, output, selection, title=title, charts=charts.value, workers=jobs, sources=sources,
                        baseline=base)
    done("report", path)
