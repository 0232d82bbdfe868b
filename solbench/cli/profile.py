"""`solbench profile`: the run of `solbench run`, plus one call of each passing candidate under Nsight Compute."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from solbench import api
from solbench.cli._app import app
from solbench.cli._common import console, fmt_time, plain, plain_line, run_settings
from solbench.cli.engine import RichProgress
from solbench.data import ResultRecord, Status
from solbench.units import si


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}%"


def profile_table(records: list[ResultRecord]) -> Table:
    """One row per record: time, the profile's kernels, DRAM bytes and utilizations, the diagnosis."""
    table = Table(title="profiles (Nsight Compute, one call each)", title_justify="left")
    for col in ("problem", "workload", "candidate", "time", "kernels", "DRAM", "DRAM %", "tensor %", "SM %",
                "occupancy", "diagnosis"):
        table.add_column(col, overflow="fold")
    for r in records:
        p = r.profile
        if p is None or p.status != "ok":
            reason = p.reason if p is not None else "no profile"
            table.add_row(plain(r.problem), plain(r.workload), plain(r.solution), fmt_time(r.time_s), "-", "-", "-",
                          "-", "-", "-", f"[red]{plain((reason or '')[:200])}[/]")
            continue
        s = p.summary
        table.add_row(plain(r.problem), plain(r.workload), plain(r.solution), fmt_time(r.time_s), str(s.kernels),
                      si(s.dram_bytes, "B"), _pct(s.dram_pct), _pct(s.tensor_pipe_pct), _pct(s.sm_pct),
                      _pct(s.occupancy_pct), plain(s.diagnosis))
    return table


@app.command()
@run_settings("device", "gpu", "budget_s", "timeout_s", "compile_timeout_s", "seed", "guards", "worker_user")
def profile(
    problems: list[str] = typer.Argument(..., help="problem.yaml paths, problem folders, or names (`solbench list`)"),
    solution: list[Path] = typer.Option(None, "--solution", "-s",
                                        help="candidate file (repeatable); default: the problem's solutions/*.py"),
    workload: list[str] = typer.Option(None, "--workload", help="profile this workload (repeatable); default: "
                                                               "each problem's largest"),
    all_workloads: bool = typer.Option(False, "--all-workloads", help="every workload, not only the largest"),
    output: Path = typer.Option(None, "-o", "--output", help="JSONL file to append to (default "
                                                            "results/profiles/<time>.jsonl); raw exports go "
                                                            "to <output>.ncu/"),
    ncu: str = typer.Option(None, "--ncu", help="path of Nsight Compute's ncu (default: $SOLBENCH_NCU, PATH, "
                                                "/usr/local/cuda/bin)"),
    ncu_option: list[str] = typer.Option(None, "--ncu-option", help="one more ncu option (repeatable), e.g. "
                                                                    "--ncu-option=--section=WarpStateStats"),
    keep_reports: bool = typer.Option(False, "--keep-reports", help="keep each .ncu-rep beside the CSV"),
    only: list[str] = typer.Option(None, "--only", help="only the candidates whose name matches this glob "
                                                        "(repeatable), e.g. --only torch_eager --only 'triton_*'"),
    settings: dict = None,  # these RunOptions fields as options (run_settings)
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Run, time and score as `solbench run`, then profile one call of each passing candidate under Nsight
    Compute (clocks left alone); the counters go to each record's `profile`. Exit 0 only if all profiled."""
    options = api.resolve_options(**settings)
    with RichProgress(enabled=not quiet) as progress:
        result = api.profile_problems(problems, solution or None, options, output=output, workloads=workload or (),
                                      all_workloads=all_workloads, progress=progress, ncu=ncu,
                                      ncu_options=ncu_option or (), keep_reports=keep_reports,
                                      log=plain_line, only=only or ())
    console.print(profile_table(result.records))
    ok = sum(r.status == Status.PASSED.value and r.profile is not None and r.profile.status == "ok"
             for r in result.records)
    console.print(f"{ok} of {len(result.records)} profiled on {plain(result.device)}; records appended to "
                  f"{plain(result.output)}", highlight=False)
    if not result.records or ok < len(result.records):
        raise typer.Exit(1)
