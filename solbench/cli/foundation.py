"""Commands over files only: validate, list, specs, sol, schema."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from solbench.cli._app import app
from solbench.cli._common import (
    ListFormat,
    console,
    echo,
    err_console,
    fmt_time,
    json_text,
    plain,
    require_results,
    si,
)
from solbench.data import (
    HardwareSpec,
    collect_files,
    find_problems,
    list_specs,
    load_problem,
    load_spec,
    problem_json_schema,
    problems_root,
    resolve_problem,
    validate_paths,
)
from solbench.engine import deep_check, new_host, problem_points, workload_point
from solbench.errors import SolbenchError


@app.command()
def validate(
    paths: list[Path] = typer.Argument(..., help="problem.yaml / spec files, or folders to search; with "
                                                  "--measured: result files or folders"),
    deep: bool = typer.Option(False, "--deep", help="also run references: FLOPs vs FlopCounterMode"),
    measured: bool = typer.Option(False, "--measured", help="compare the problems' FLOP and byte formulas with "
                                                            "the counters of profiled records (`solbench profile`)"),
    fmt: ListFormat = typer.Option(ListFormat.table, "--format", help="with --measured: table, markdown or json"),
    show_all: bool = typer.Option(False, "--all", help="with --measured: list the agreeing problems too"),
    problems: Path = typer.Option(None, "--problems", help="with --measured: folder the problems' `measured:` "
                                                           "explanations are read from (default: the library)"),
) -> None:
    """Check problem and spec files; one line per error (file, key, why); exit 1 on any. With --measured,
    list the problems whose formulas differ from the counters by more than 10%; exit 1 on any that its
    problem file does not explain (`measured:`)."""
    if measured:
        _validate_measured(paths, fmt, show_all, problems)
        return
    with new_host() as host:  # --deep: the problems' code runs in one sandboxed host that may read their folders
        if deep:
            host.expect(f.parent for f in collect_files(list(paths))[0])
        n, errs = validate_paths(list(paths), check=(lambda p: deep_check(p, host)) if deep else None)
    for e in errs:
        err_console.print(e, markup=False, highlight=False, soft_wrap=True)
    if errs:
        err_console.print(f"{len(errs)} error(s) in {n} file(s)", style="red")
        raise typer.Exit(1)
    console.print(f"{n} file(s) OK", style="green")


def _validate_measured(paths: list[Path], fmt: ListFormat, show_all: bool, problems: Path | None) -> None:
    """`validate --measured`: declared FLOPs and bytes against the profiled records' counters."""
    from solbench.data import library_explanations
    from solbench.present import TOLERANCE, load_results, markdown_table, measured_rows

    require_results(paths, "pass result files (.jsonl) written by `solbench profile`")
    if problems is not None and not problems.is_dir():
        raise SolbenchError(f"--problems {problems}: no such folder; give the folder holding the problem files")
    df = load_results(paths, warn=False)
    names = tuple(df["problem"].unique()) if "problem" in df.columns else ()
    rows = measured_rows(df, explanations=library_explanations(names, problems))
    if not rows:
        raise SolbenchError("no profiled record in these results: run `solbench profile PROBLEM...` first")
    off = [r for r in rows if r.disagrees]
    shown = rows if show_all else off
    if fmt == ListFormat.json:
        typer.echo(json_text([r.as_dict() for r in shown]))
    elif fmt == ListFormat.markdown:
        echo(markdown_table(shown))
    else:
        console.print(_measured_table(shown, TOLERANCE))
    open_ = [r for r in off if r.unexplained]
    err_console.print(f"{len(off)} of {len(rows)} profiled (problem, workload) pairs differ by more than "
                      f"{TOLERANCE:.0%}; {len(open_)} not explained in their problem file (`measured:`)",
                      style="red" if open_ else "green", highlight=False)
    if open_:
        raise typer.Exit(1)


def _measured_table(rows: list, tolerance: float) -> Table:
    from solbench.present import note_text

    table = Table(title=f"declared vs measured (ratio = counted / declared; off by more than {tolerance:.0%})",
                  title_justify="left")
    for col in ("problem", "workload", "candidate", "FLOPs ratio", "bytes ratio", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        style = "red" if r.unexplained else "yellow" if r.disagrees else "green"
        table.add_row(plain(r.problem), plain(r.workload), plain(r.candidate),
                      "-" if r.flops_ratio is None else f"[{style}]{r.flops_ratio:.3g}[/]",
                      "-" if r.bytes_ratio is None else f"[{style}]{r.bytes_ratio:.3g}[/]", plain(note_text(r)))
    return table


@app.command("list")
def list_problems(
    problems: Path = typer.Option(None, "--problems", help="folder of problems (default: $SOLBENCH_PROBLEMS, else the shipped library)"),
    gpu: str = typer.Option("h200_sxm", "--gpu", help="spec id for the bound column"),
    fmt: ListFormat = typer.Option(ListFormat.table, "--format"),
) -> None:
    """The problems, their workloads, and their bound on a given GPU."""
    root = problems_root(problems)
    if not root.exists():
        raise SolbenchError(f"problems folder {root} not found: pass --problems DIR")
    spec = load_spec(gpu)
    loaded = [load_problem(f) for f in find_problems(root)]
    # Problems whose work their code computes (cost hooks, flops: auto) share one sandboxed host; the rest need none.
    with new_host() as host:
        host.expect(p.folder for p in loaded if p.work_runs_code)
        points = [problem_points(p, spec, host) for p in loaded]
    rows = []
    for p, pts in zip(loaded, points, strict=True):
        dtypes = sorted({t.dtype for t in [*p.inputs.values(), *p.outputs.values()] if t.shape is not None})
        rows.append({
            "name": p.name,
            "model": p.source.model,
            "tags": p.tags,
            "dtypes": dtypes,
            "workloads": [{"name": pt.workload, "bound": pt.bound, "t_ideal_s": pt.t_ideal_s} for pt in pts],
            "path": str(p.path),
        })
    if fmt == ListFormat.json:
        typer.echo(json_text(rows))
        return
    if fmt == ListFormat.markdown:
        echo(f"| problem | model | op tags | dtypes | workloads | bound on {spec.name} |")
        echo("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            bounds = sorted({w["bound"] for w in r["workloads"]})
            wl = ", ".join(f"`{w['name']}`" for w in r["workloads"])
            folder = Path(r["path"]).parent
            try:
                folder = folder.relative_to(root.resolve() if folder.is_absolute() else root)
            except ValueError:
                pass
            echo(f"| [{r['name']}]({folder.as_posix()}/problem.yaml) | {r['model']} | "
                 f"{', '.join(r['tags'])} | {', '.join(r['dtypes'])} | {wl} | {' / '.join(bounds)} |")
        return
    table = Table(title=f"{len(rows)} problems (bound on {plain(spec.name)})")
    for col in ("problem", "model", "workloads", "bound"):
        table.add_column(col)
    for r in rows:
        mem = sum(w["bound"] == "memory" for w in r["workloads"])
        comp = len(r["workloads"]) - mem
        table.add_row(plain(r["name"]), plain(r["model"]), str(len(r["workloads"])), f"{comp} compute / {mem} memory")
    console.print(table)


@app.command()
def specs(
    fmt: ListFormat = typer.Option(ListFormat.table, "--format"),
) -> None:
    """The hardware spec files: peaks, bandwidth, ridge point; and cpu_estimate, the built-in CPU bound."""
    from solbench.data import cpu_estimate_spec

    all_specs = [*list_specs(), cpu_estimate_spec()]  # `--gpu cpu_estimate` names it like a file's id
    if fmt == ListFormat.json:
        typer.echo(json.dumps([s.model_dump(mode="json") for s in all_specs], indent=2))
        return
    table = Table(title="hardware specs (dense peaks)")
    for col in ("id", "name", "kind", "BW", "bf16", "fp32", "fp8", "ridge bf16 (FLOP/B)"):
        table.add_column(col)

    def peak(s: HardwareSpec, k: str) -> str:
        return si(s.peak_flops.get(k), "FLOP/s") if k in s.peak_flops else "-"

    for s in all_specs:
        ridge = f"{s.ridge_point('bfloat16'):.0f}" if "bfloat16" in s.peak_flops else "-"
        table.add_row(plain(s.id), plain(s.name), s.kind, si(s.memory_bandwidth, "B/s"), peak(s, "bfloat16"),
                      peak(s, "float32"), peak(s, "float8_e4m3fn"), ridge)
    if fmt == ListFormat.markdown:
        echo("| id | name | bandwidth | bf16 | fp32 | fp8 |")
        echo("| --- | --- | --- | --- | --- | --- |")
        for s in all_specs:
            echo(f"| {s.id} | {s.name} | {si(s.memory_bandwidth, 'B/s')} | {peak(s, 'bfloat16')} | "
                 f"{peak(s, 'float32')} | {peak(s, 'float8_e4m3fn')} |")
        return
    console.print(table)


@app.command()
def sol(
    problem: str = typer.Argument(..., help="problem.yaml path, folder, or name"),
    gpu: str = typer.Option(..., "--gpu", help="spec id (see `solbench specs`) or spec file"),
    workload: str = typer.Option(None, "--workload", help="one workload by name"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """FLOPs, bytes, intensity, T_compute, T_memory, T_ideal and bound per workload."""
    p = resolve_problem(problem)
    spec = load_spec(gpu)
    with new_host() as host:
        pts = [workload_point(p, workload, spec, host=host)] if workload else problem_points(p, spec, host)
    if as_json:
        typer.echo(json_text([pt.contract_dict() for pt in pts]))
        return
    table = Table(title=f"{plain(p.name)} on {plain(spec.name)} ({p.compute_dtype} peak {si(spec.peak(p.compute_dtype), 'FLOP/s')}, "
                        f"{si(spec.memory_bandwidth, 'B/s')}, ridge {spec.ridge_point(p.compute_dtype):.0f} FLOP/B)")
    for col in ("workload", "FLOPs", "bytes", "FLOP/B", "T_compute", "T_memory", "T_ideal", "bound"):
        table.add_column(col, justify="right" if col not in ("workload", "bound") else "left")
    for pt in pts:
        table.add_row(plain(pt.workload), si(pt.flops), si(pt.bytes, "B"), f"{pt.arithmetic_intensity:.3g}",
                      fmt_time(pt.t_compute_s), fmt_time(pt.t_memory_s), fmt_time(pt.t_ideal_s), pt.bound)
    console.print(table)


class SchemaKind(str, Enum):
    problem = "problem"
    spec = "spec"
    record = "record"


@app.command()
def schema(kind: SchemaKind = typer.Argument(SchemaKind.problem)) -> None:
    """Print the JSON Schema of a file format (for editors that validate YAML)."""
    if kind == SchemaKind.problem:
        out = problem_json_schema()
    elif kind == SchemaKind.spec:
        out = HardwareSpec.model_json_schema()
    else:
        from solbench.data import ResultRecord

        out = ResultRecord.model_json_schema()
    typer.echo(json.dumps(out, indent=2))
