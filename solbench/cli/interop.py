"""`solbench import` and `solbench export`: problems from peers' formats, records into theirs."""

from __future__ import annotations

from pathlib import Path

import typer

from solbench.cli._app import app
from solbench.cli._common import err_console, plain, require_results

import_app = typer.Typer(help="make a problem folder from a peer's format", no_args_is_help=True)
export_app = typer.Typer(help="write records in a peer's format", no_args_is_help=True)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")


def _done(problem_file: Path, notes: list[str]) -> None:
    from solbench.data import load_problem

    problem = load_problem(problem_file)  # validated as any problem is: a converter bug fails here, not later
    for note in notes:
        err_console.print(f"note: {plain(note)}", highlight=False)
    typer.echo(f"{problem.name}: {len(problem.workloads)} workloads -> {problem_file}")


@import_app.command("flashinfer-trace")
def import_flashinfer_trace(
    definition: Path = typer.Argument(..., help="a FlashInfer-Trace / SOL-ExecBench definition .json"),
    workloads: Path = typer.Option(None, "--workloads", help="its workloads .jsonl (bare or trace lines)"),
    data: Path = typer.Option(None, "--data", help="the dataset root that safetensors inputs' paths start from"),
    solution: list[Path] = typer.Option(None, "--solution", help="a Solution .json to import as a candidate (repeatable)"),
    output: Path = typer.Option(..., "-o", "--output", help="the problem folder to write"),
) -> None:
    """A problem folder (problem.yaml, reference.py, data/) from a definition and its workloads."""
    from solbench.data import import_definition, import_solution, read_json

    problem_file, notes = import_definition(definition, output, workloads, data)
    defn = read_json(definition, "definition")
    for s in solution or []:
        notes.append(f"candidate {import_solution(s, output / 'solutions', defn)}")
    _done(problem_file, notes)


@import_app.command("kernelbench")
def import_kernelbench(
    module: Path = typer.Argument(..., help="a KernelBench problem .py (Model, get_inputs, get_init_inputs)"),
    output: Path = typer.Option(..., "-o", "--output", help="the problem folder to write"),
    force: bool = typer.Option(False, "--force", help="write into a folder that already has files"),
) -> None:
    """A problem folder from a KernelBench module (its parameters become inputs) with a starter candidate,
    solutions/torch_eager.py. Runs the module's code."""
    from solbench.engine import import_module

    problem_file, notes = import_module(module, output, force)
    _done(problem_file, notes)


@export_app.command("flashinfer-trace")
def export_flashinfer_trace(
    results: list[Path] = typer.Argument(..., help="results .jsonl files or folders"),
    output: Path = typer.Option(..., "-o", "--output", help="the traces .jsonl to write"),
) -> None:
    """Records as FlashInfer-Trace traces, one JSON line each."""
    from solbench.data import export_traces

    require_results(results)
    count = export_traces(results, output)
    typer.echo(f"{count} traces -> {output}")
