"""`solbench run` and `solbench demo`: check, time and score candidates (thin over solbench.api)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import typer
from rich import box
from rich.console import Group
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from solbench import api
from solbench.cli._app import app
from solbench.cli._common import console, err_console, fmt_time, plain, plain_line, run_settings
from solbench.data import NOISY_FLAG, ResultRecord, Status, noisy_reason
from solbench.data import sol as sol_fraction
from solbench.engine import GUARDS_OFF_FLAG
from solbench.present import one_line
from solbench.units import sol_text

_STATUS_STYLE = {
    Status.PASSED.value: "green",
    Status.INCORRECT.value: "red",
    Status.RUNTIME_ERROR.value: "red",
    Status.COMPILE_ERROR.value: "red",
    Status.TIMEOUT.value: "yellow",
    Status.REWARD_HACK.value: "magenta",
}


class RichProgress:
    """The engine's progress hooks on stderr: a live bar with the time left on a terminal; elsewhere
    (a log, a pipe) one plain line per record, so a long run shows what it did as it goes.

    Nothing is drawn before ``begin``: a mistake found while planning prints its one line alone.
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.live = enabled and err_console.is_terminal
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("left"), TimeRemainingColumn(), console=err_console, transient=True,
                            disable=not self.live)
        self.task_id = self.bar.add_task("starting", total=None)
        self.total, self.done, self.started = 0, 0, time.monotonic()

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def begin(self, total: int) -> None:
        self.total, self.done, self.started = total, 0, time.monotonic()
        self.bar.update(self.task_id, total=total)
        if self.live:
            self.bar.start()

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.bar.update(self.task_id, description=f"{plain(problem)} [bold]{plain(workload)}[/] {plain(candidate)}")

    def executor(self, label: str, activity: str) -> None:
        """A row per executor (device@host) in a run on several (``--gpus``, ``--jobs``, ``--cluster``)."""
        rows = self.__dict__.setdefault("executor_rows", {})
        if label not in rows:
            rows[label] = self.bar.add_task("", total=None)
        self.bar.update(rows[label], description=f"  {plain(label)}: {plain(activity)}")

    def record(self, record: ResultRecord) -> None:
        self.bar.advance(self.task_id)
        self.done += 1
        if self.enabled and not self.live:
            err_console.print(progress_line(record, self.done, self.total, time.monotonic() - self.started),
                              markup=False, highlight=False, soft_wrap=True)


def progress_line(record: ResultRecord, done: int, total: int, elapsed_s: float) -> str:
    """``[3/12] problem workload candidate: PASSED 1.2 ms SOL 0.812 (0:41 elapsed, about 1:10 left)``."""
    what = f"{record.status} {fmt_time(record.time_s)} SOL {sol_text(record.sol)}" if record.sol is not None else (
        f"{record.status}: {one_line(record.reason or '', 160)}")
    left = elapsed_s / done * (total - done) if done and total >= done else None
    when = f"{_clock(elapsed_s)} elapsed" + (f", about {_clock(left)} left" if left is not None and done < total else "")
    names = " ".join(one_line(n, 120) for n in (record.problem, record.workload, record.solution))
    return f"[{done}/{total or '?'}] {names}: {what} ({when})"


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _rate(x: float | None, scale: float) -> str:
    return f"{x / scale:.3g}" if x else "-"


NARROW_COLUMNS = 100  # below this a run table keeps workload, candidate, status, time and SOL; reasons go below it


def results_tables(records: list[ResultRecord], width: int | None = None) -> list[Table | Group]:
    """One table per problem: status, time, SOL, bound, achieved TFLOP/s and TB/s (G on the CPU), reason.
    On a terminal narrower than NARROW_COLUMNS (80 is common) the bound and rates are left out and each
    reason is a line under the table, so nothing is cut or folded letter by letter."""
    by_problem: dict[str, list[ResultRecord]] = {}
    for r in records:
        by_problem.setdefault(r.problem, []).append(r)
    return [_results_table(problem, rows, width is not None and width < NARROW_COLUMNS)
            for problem, rows in by_problem.items()]


def _results_table(problem: str, rows: list[ResultRecord], narrow: bool) -> Table | Group:
    prefix, scale = ("T", 1e12) if rows[0].device_type == "cuda" else ("G", 1e9)
    title = f"{plain(problem)} (scored against {plain(rows[0].gpu_spec)})"
    # narrow: the title on a line of its own (a table's title wraps at the table's width)
    table = Table(title=None if narrow else title, title_justify="left", box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD)
    wide_cols = () if narrow else ("bound", f"{prefix}FLOP/s", f"{prefix}B/s")
    for col in ("workload", "candidate", "status", "time", "SOL", *wide_cols):
        numeric = col in ("time", "SOL") or col.endswith("/s")
        # Numbers and statuses never wrap; names fold rather than end in "…" when the terminal is narrow.
        table.add_column(col, justify="right" if numeric else "left", no_wrap=numeric or col == "status",
                         overflow="ellipsis" if numeric else "fold")
    why = {id(r): r.reason or (noisy_reason(r.timing, r.telemetry) if r.status == Status.PASSED.value else None)
           for r in rows}
    reasons = any(why.values())
    if reasons and not narrow:
        table.add_column("reason", overflow="fold", ratio=1, min_width=20)
    for r in rows:
        style = _STATUS_STYLE.get(r.status, "")
        noisy = r.status == Status.PASSED.value and noisy_reason(r.timing, r.telemetry)
        status = f"[{style}]{plain(r.status)}[/]" + (" [yellow]noisy[/]" if noisy else "")
        cells = [plain(r.workload), plain(r.solution), status, fmt_time(r.time_s), sol_text(r.sol)]
        if not narrow:
            cells += [plain(r.bound), _rate(r.achieved_flops_per_s, scale), _rate(r.achieved_bytes_per_s, scale)]
        table.add_row(*cells, *([plain(one_line(why[id(r)] or "", 200))] if reasons and not narrow else []))
    if not narrow:
        return table
    # one line each: a reason quoting a file name with a newline must not start a line of its own
    notes = [Text(f"  {r.workload} {r.solution}: {one_line(why[id(r)] or '', 300)}", overflow="fold")
             for r in rows if why[id(r)]]
    return Group(Text(title, style="italic"), table, *notes)


def interleave_tables(records: list[ResultRecord]) -> list[Table]:
    """One table per problem, one row per (workload, candidate) over its interleaved rounds: the
    median time of the passed rounds, SOL at that time, and the spread (max - min) / median."""
    groups: dict[str, dict[tuple[str, str], list[ResultRecord]]] = {}
    for r in records:
        groups.setdefault(r.problem, {}).setdefault((r.workload, r.solution), []).append(r)
    tables = []
    for problem, rows in groups.items():
        first = next(iter(rows.values()))[0]
        table = Table(title=f"{plain(problem)}, interleaved rounds (scored against {plain(first.gpu_spec)})",
                      title_justify="left")
        for col in ("workload", "candidate", "passed", "median time", "SOL", "spread", "times"):
            table.add_column(col, justify="left" if col in ("workload", "candidate", "times") else "right",
                             no_wrap=col != "times")
        for (workload, candidate), rounds in rows.items():
            passed = [r for r in rounds if r.status == Status.PASSED.value and r.time_s]
            style = "green" if len(passed) == len(rounds) else "red"
            median = statistics.median(r.time_s for r in passed) if passed else None
            sol = sol_fraction(passed[0].t_ideal_s, median) if median and passed[0].t_ideal_s else None  # at the median
            spread = (max(r.time_s for r in passed) - min(r.time_s for r in passed)) / median if median else None
            table.add_row(plain(workload), plain(candidate), f"[{style}]{len(passed)}/{len(rounds)}[/]", fmt_time(median),
                          sol_text(sol),
                          "-" if spread is None else f"{spread:.1%}",
                          plain(" ".join(fmt_time(r.time_s) if r.time_s else r.status for r in rounds)))
        tables.append(table)
    return tables


def noisy_note(records: list[ResultRecord]) -> list[str]:
    """One line when timings are noisy: how many, and whether the machine was busy while they ran."""
    noisy = [r for r in records if NOISY_FLAG in r.flags]
    if not noisy:
        return []
    busy = sum("machine_busy" in r.flags for r in noisy)
    why = f"other processes kept its CPUs busy during {busy} of them" if busy else "their spread is wide"
    return [f"{len(noisy)} of {len(records)} timings are noisy ({why}): marked in the table; rerun on an idle "
            "machine before ranking on them"]


def _finish(records: list[ResultRecord], output: Path, spec_id: str, device: str, as_json: bool,
            interleaved: bool = False) -> None:
    passed = sum(r.status == Status.PASSED.value for r in records)
    out = err_console if as_json else console
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
    if interleaved:  # the failures' reasons still get their rows; the passed rounds are summarised
        failed = [r for r in records if r.status != Status.PASSED.value]
        for table in (results_tables(failed, out.width) if failed else []) + interleave_tables(records):
            out.print(table)
    else:
        for table in results_tables(records, out.width):
            out.print(table)
    out.print(f"{passed} of {len(records)} passed on {plain(device)} (spec {plain(spec_id)}); records appended to "
              f"{plain(output)}",
              highlight=False)
    if not records or passed < len(records):
        raise typer.Exit(1)


@app.command()
@run_settings()
def run(
    problems: list[str] = typer.Argument(..., help="problem.yaml paths, problem folders, or names (`solbench list`)"),
    solution: list[Path] = typer.Option(None, "--solution", "-s",
                                        help="candidate .py file (repeatable); default: the problem's solutions/*.py"),
    output: Path = typer.Option(None, "-o", "--output",
                                help="JSONL file to append to (default results/runs/<date>.jsonl)"),
    as_json: bool = typer.Option(False, "--json", help="print the records as JSON on stdout"),
    workload: list[str] = typer.Option(None, "--workload", help="run only this workload (repeatable)"),
    small: bool = typer.Option(False, "--small", help="one workload 'small' at the problem's test_axes (quick CPU runs; "
                               "the default on a CPU when no --workload is named)"),
    all_workloads: bool = typer.Option(False, "--all-workloads", help="every workload, also on a CPU"),
    problems_dir: Path = typer.Option(None, "--problems", help="folder problems are named in (default: "
                                      "$SOLBENCH_PROBLEMS, else the shipped library)"),
    settings: dict = None,  # every RunOptions field as an option (run_settings)
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Check, time and score candidates; append one record per (candidate, workload). Exit 0 only if all pass."""
    options = api.resolve_options(**settings)
    if not options.guards:
        err_console.print(f"[yellow]warning:[/] guards off (--no-guards): engine-only checks, every record is flagged "
                          f"{GUARDS_OFF_FLAG}; never use this for untrusted code", highlight=False)
    with RichProgress(enabled=not quiet) as progress:
        result = api.run_problems(problems, solution or None, options, output=output, workloads=workload or (),
                                  small=small, progress=progress, log=plain_line, problems_dir=problems_dir,
                                  all_workloads=all_workloads)
    _finish(result.records, result.output, result.spec_id, result.device, as_json,
            interleaved=options.interleave > 0)


@app.command()
def demo(
    device: str = typer.Option(None, "--device", help="cuda or cpu (default: cuda when available)"),
    gpu: str = typer.Option(None, "--gpu", help="spec id or file to score against"),
    output: Path = typer.Option(None, "-o", "--output", help="JSONL file (default ~/.local/share/solbench/demo/<timestamp>.jsonl, or under $SOLBENCH_HOME)"),
    problems: Path = typer.Option(None, "--problems", help="folder of problems (default: ./problems)"),
    as_json: bool = typer.Option(False, "--json", help="print the records as JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """The main job on whatever device is here: a few problems and their shipped candidates, end to end."""
    with RichProgress(enabled=not quiet) as progress:
        result = api.demo(device, output, gpu=gpu, problems_dir=problems, progress=progress,
                          log=lambda line: err_console.print(line, markup=False, highlight=False))
    for note in [*result.notes, *noisy_note(result.records)]:
        err_console.print(note, highlight=False)
    try:
        _finish(result.records, result.records_path, result.run.spec_id, result.run.device, as_json)
    finally:
        if result.records:  # the leaderboard, a roofline chart and the report, whatever passed
            from solbench.present import present_demo

            present_demo(result.records_path, result.records_path.with_suffix(""),
                         console=err_console if as_json else console)
