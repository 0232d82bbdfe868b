"""`solbench run` and `solbench demo`: check, time and score candidates (thin over solbench.api)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from solbench import api
from solbench.cli._app import app
from solbench.cli._common import console, err_console, fmt_time, plain
from solbench.data.record import ResultRecord, Status
from solbench.data.roofline import sol as sol_fraction
from solbench.engine.options import GUARDS_OFF_FLAG
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
    """The engine's progress hooks drawn as a rich progress bar on stderr."""

    def __init__(self, enabled: bool = True):
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=err_console, transient=True, disable=not enabled)
        self.task_id = self.bar.add_task("starting", total=None)

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def begin(self, total: int) -> None:
        self.bar.update(self.task_id, total=total)

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.bar.update(self.task_id, description=f"{plain(problem)} [bold]{plain(workload)}[/] {plain(candidate)}")

    def record(self, record: ResultRecord) -> None:
        self.bar.advance(self.task_id)


def _rate(x: float | None, scale: float) -> str:
    return f"{x / scale:.3g}" if x else "-"


def results_tables(records: list[ResultRecord]) -> list[Table]:
    """One table per problem: status, time, SOL, bound, achieved TFLOP/s and TB/s (G on the CPU), reason."""
    by_problem: dict[str, list[ResultRecord]] = {}
    for r in records:
        by_problem.setdefault(r.problem, []).append(r)
    tables = []
    for problem, rows in by_problem.items():
        prefix, scale = ("T", 1e12) if rows[0].device_type == "cuda" else ("G", 1e9)
        table = Table(title=f"{plain(problem)} (scored against {plain(rows[0].gpu_spec)})", title_justify="left")
        for col in ("workload", "candidate", "status", "time", "SOL", "bound", f"{prefix}FLOP/s", f"{prefix}B/s"):
            table.add_column(col, justify="right" if col in ("time", "SOL") or col.endswith("/s") else "left",
                             no_wrap=True)
        reasons = any(r.reason for r in rows)
        if reasons:
            table.add_column("reason", overflow="fold", ratio=1, min_width=20)
        for r in rows:
            style = _STATUS_STYLE.get(r.status, "")
            cells = [plain(r.workload), plain(r.solution), f"[{style}]{plain(r.status)}[/]", fmt_time(r.time_s),
                     sol_text(r.sol), plain(r.bound),
                     _rate(r.achieved_flops_per_s, scale), _rate(r.achieved_bytes_per_s, scale)]
            table.add_row(*cells, *([plain((r.reason or "")[:200])] if reasons else []))
        tables.append(table)
    return tables


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


def _finish(records: list[ResultRecord], output: Path, spec_id: str, device: str, as_json: bool,
            interleaved: bool = False) -> None:
    passed = sum(r.status == Status.PASSED.value for r in records)
    out = err_console if as_json else console
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
    if interleaved:  # the failures' reasons still get their rows; the passed rounds are summarised
        failed = [r for r in records if r.status != Status.PASSED.value]
        for table in (results_tables(failed) if failed else []) + interleave_tables(records):
            out.print(table)
    else:
        for table in results_tables(records):
            out.print(table)
    out.print(f"{passed} of {len(records)} passed on {plain(device)} (spec {plain(spec_id)}); records appended to "
              f"{plain(output)}",
              highlight=False)
    if not records or passed < len(records):
        raise typer.Exit(1)


def _setting(name: str, *flags: str, **kw: Any) -> Any:
    """A typer option for a RunOptions field: its default and help are the model's (declared there only)."""
    field = api.RunOptions.model_fields[name]
    default = None if field.default_factory is not None else field.default  # computed: its help says how
    return typer.Option(default, *flags, help=kw.pop("help", field.description), **kw)


@app.command()
def run(
    problems: list[str] = typer.Argument(..., help="problem.yaml paths, problem folders, or names (`solbench list`)"),
    solution: list[Path] = typer.Option(None, "--solution", "-s",
                                        help="candidate .py file (repeatable); default: the problem's solutions/*.py"),
    device: str = _setting("device", "--device"),
    gpu: str = _setting("gpu", "--gpu"),
    output: Path = typer.Option(None, "-o", "--output",
                                help="JSONL file to append to (default results/runs/<date>.jsonl)"),
    as_json: bool = typer.Option(False, "--json", help="print the records as JSON on stdout"),
    timeout: float = _setting("timeout_s", "--timeout"),
    compile_timeout: float = _setting("compile_timeout_s", "--compile-timeout"),
    workload: list[str] = typer.Option(None, "--workload", help="run only this workload (repeatable)"),
    seed: int = _setting("seed", "--seed"),
    budget: float = _setting("budget_s", "--budget"),
    rounds: int = _setting("rounds", "--rounds"),
    timing_method: str = _setting("timing_method", "--timing-method"),
    workers_ahead: int = _setting("workers_ahead", "--workers-ahead"),
    interleave: int = _setting("interleave", "--interleave"),
    cooldown: float = _setting("cooldown_max_s", "--cooldown"),
    all_streams: bool = _setting("all_streams", "--all-streams/--events-only"),
    guards: bool = _setting("guards", " /--no-guards", help="run without the guards, only to measure what they add; "
                            f"never for untrusted code (every record is flagged {GUARDS_OFF_FLAG})", show_default=False),
    log_bytes: int = _setting("log_bytes", "--log-bytes"),
    worker_user: str = _setting("worker_user", "--worker-user"),
    worker_read: list[str] = typer.Option(None, "--worker-read", help=api.RunOptions.model_fields["worker_reads"].description
                                          + " (repeatable)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Check, time and score candidates; append one record per (candidate, workload). Exit 0 only if all pass."""
    options = api.resolve_options(
        device=device, gpu=gpu, timeout_s=timeout, compile_timeout_s=compile_timeout, budget_s=budget, rounds=rounds,
        seed=seed, timing_method=timing_method, workers_ahead=workers_ahead, interleave=interleave,
        cooldown_max_s=cooldown, all_streams=all_streams, guards=guards, log_bytes=log_bytes, worker_user=worker_user,
        worker_reads=tuple(worker_read) if worker_read else None,
    )
    if not options.guards:
        err_console.print(f"[yellow]warning:[/] guards off (--no-guards): engine-only checks, every record is flagged "
                          f"{GUARDS_OFF_FLAG}; never use this for untrusted code", highlight=False)
    with RichProgress(enabled=not quiet) as progress:
        result = api.run_problems(problems, solution or None, options, output=output, workloads=workload or (),
                                  progress=progress)
    _finish(result.records, result.output, result.spec_id, result.device, as_json,
            interleaved=options.interleave > 0)


@app.command()
def demo(
    device: str = typer.Option(None, "--device", help="cuda or cpu (default: cuda when available)"),
    gpu: str = typer.Option(None, "--gpu", help="spec id or file to score against"),
    output: Path = typer.Option(None, "-o", "--output", help="JSONL file (default results/demo/<timestamp>.jsonl)"),
    problems: Path = typer.Option(None, "--problems", help="folder of problems (default: ./problems)"),
    as_json: bool = typer.Option(False, "--json", help="print the records as JSON on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """The main job on whatever device is here: a few problems and their shipped candidates, end to end."""
    with RichProgress(enabled=not quiet) as progress:
        result = api.demo(device, output, gpu=gpu, problems_dir=problems, progress=progress)
    for note in result.notes:
        err_console.print(note, highlight=False)
    try:
        _finish(result.records, result.records_path, result.run.spec_id, result.run.device, as_json)
    finally:
        if result.records:  # the leaderboard, a roofline chart and the report, whatever passed
            from solbench.present.report import present_demo

            present_demo(result.records_path, result.records_path.with_suffix(""),
                         console=err_console if as_json else console)
