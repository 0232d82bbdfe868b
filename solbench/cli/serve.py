"""`solbench serve` (the submission service, its tokens and its records) and `solbench submit`
(its client, printing the same table as `run`): thin over solbench.serve."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from solbench.cli._app import app
from solbench.cli._common import console, echo, err_console, plain, run_settings
from solbench.cli.engine import progress_line, results_tables
from solbench.data import Status, read_record
from solbench.errors import SolbenchError
from solbench.settings import SERVE_DB, SERVE_LEASE_S

serve_app = typer.Typer(help="The submission service: an HTTP API, a durable queue, a database and a live "
                             "leaderboard in front of the engine (needs `pip install \"solbench\\[serve]\"`).",
                        invoke_without_command=True)
token_app = typer.Typer(help="Bearer tokens of the service (only their hashes are stored).", no_args_is_help=True)
app.add_typer(serve_app, name="serve")
serve_app.add_typer(token_app, name="token")

DB_HELP = "database: sqlite:///PATH (default sqlite:///solbench-serve/serve.db) or postgresql://USER@HOST/DB"


def _db_option() -> typer.Option:
    return typer.Option(SERVE_DB, "--db", help=DB_HELP)


@serve_app.callback()
@run_settings("device", "gpu", "gpus", "cluster", "budget_s", "timeout_s", "compile_timeout_s")
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (0.0.0.0: every interface)"),
    port: int = typer.Option(8000, "--port", help="port to listen on"),
    db: str = _db_option(),
    settings: dict = None,  # these RunOptions fields as options (run_settings): every job runs with them
    problems: Path = typer.Option(None, "--problems", help="library folder submissions name problems from "
                                  "(default: $SOLBENCH_PROBLEMS, else the shipped library)"),
    allow_uploads: bool = typer.Option(False, "--allow-uploads", help="accept submissions that bring their own "
                                       "problem folder (its reference runs unsandboxed: trusted token holders only)"),
    max_source: int = typer.Option(256 * 1024, "--max-source", help="largest candidate source (and uploaded file), bytes"),
    max_body: int = typer.Option(2 * 1024 * 1024, "--max-body", help="largest request body, bytes"),
    lease: float = typer.Option(SERVE_LEASE_S, "--lease", help="seconds without a heartbeat after which a running "
                                "submission (its server killed) is queued again"),
    batch: int = typer.Option(8, "--batch", help="queued submissions one job process takes at once"),
    slots: int = typer.Option(1, "--slots", help="job processes at once (1 on one GPU: runs side by side "
                              "would time each other)"),
    state_dir: Path = typer.Option(None, "--state-dir", help="where jobs keep their files (default: beside the "
                                   "SQLite file, else ./solbench-serve)"),
) -> None:
    """Run the submission service in the foreground (Ctrl-C stops it; unfinished submissions stay queued)."""
    if ctx.invoked_subcommand is not None:
        return
    from solbench.serve import Limits, ServeConfig
    from solbench.serve import serve as run_service

    if min(max_source, max_body, batch, slots) < 1 or lease <= 0:
        raise SolbenchError("--max-source, --max-body, --batch, --slots and --lease must be positive")
    limits = Limits(max_source, max_body, allow_uploads, str(problems.resolve()) if problems else None)
    run_service(ServeConfig(db, host, port, settings, limits, state_dir, lease, batch, slots),
                log=lambda line: err_console.print(line, markup=False, highlight=False))


@token_app.command("add")
def token_add(
    name: str = typer.Argument(..., help="who the token is for (shown with their submissions)"),
    db: str = _db_option(),
    per_day: int = typer.Option(200, "--per-day", help="submissions per 24 hours"),
    max_pending: int = typer.Option(50, "--max-pending", help="submissions queued or running at once"),
) -> None:
    """Make a token; it is printed once, alone on the last line (only its hash is kept)."""
    from solbench.serve import open_store

    if not name.strip() or len(name) > 64 or not name.isprintable():
        raise SolbenchError("token name: 1 to 64 printable characters")
    token = open_store(db).add_token(name, per_day, max_pending)
    err_console.print(f"token for {plain(name)} ({per_day} a day, {max_pending} pending at most); keep it, it is "
                      "not shown again:", highlight=False)
    typer.echo(token)


@token_app.command("list")
def token_list(db: str = _db_option()) -> None:
    """The tokens' names and quotas (never the tokens)."""
    from solbench.serve import open_store

    for t in open_store(db).list_tokens():
        echo(f"{t['name']}\t{t['per_day']} a day\t{t['max_pending']} pending\t{'revoked' if t['revoked'] else 'live'}")


@token_app.command("revoke")
def token_revoke(name: str = typer.Argument(...), db: str = _db_option()) -> None:
    """Revoke a token: its submissions stay, it submits no more."""
    from solbench.serve import open_store

    if not open_store(db).revoke_token(name):
        raise SolbenchError(f"no token named {name!r} (see `solbench serve token list`)")
    err_console.print(f"revoked {plain(name)}", highlight=False)


@serve_app.command("baselines")
def baselines(
    problems: list[str] = typer.Argument(..., help="library problem ids"),
    db: str = _db_option(),
    library: Path = typer.Option(None, "--problems", help="library folder (as the server's --problems)"),
    workload: list[str] = typer.Option(None, "--workload", help="only this workload (repeatable)"),
    small: bool = typer.Option(False, "--small", help="one small workload per problem"),
) -> None:
    """Queue the problems' shipped library baselines (files that declare BASELINE): the leaderboard's
    best-known columns compare every submission with them."""
    from solbench.serve import queue_baselines

    queued = queue_baselines(db, problems, str(library.resolve()) if library else None, workload or [], small)
    for problem, candidate, sub in queued:
        echo(f"#{sub}\t{problem}\t{candidate}")
    if not queued:
        raise SolbenchError(f"{', '.join(problems)}: no shipped library baseline (solutions/ files with BASELINE)")


@serve_app.command("export")
def export(db: str = _db_option(),
           output: Path = typer.Option(None, "-o", "--output", help="JSONL file to write (default: standard output)")) -> None:
    """Every record in the database as the JSONL records of `solbench run` (readable by every command)."""
    from solbench.serve import open_store

    lines = [json.dumps({k: v for k, v in r.items() if not k.startswith("_")}) for r in open_store(db).records()]
    text = "".join(line + "\n" for line in lines)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        err_console.print(f"{len(lines)} records written to {plain(output)}", highlight=False)


@app.command()
def submit(
    file: Path = typer.Argument(..., help="the candidate: a .py (or .cu) file"),
    problem: str = typer.Option(..., "--problem", "-p", help="a library id (`solbench list`) or a problem folder "
                                "(uploaded with the candidate)"),
    server: str = typer.Option(None, "--server", help="the service's URL (default $SOLBENCH_SERVER, else "
                               "http://127.0.0.1:8000)"),
    token: str = typer.Option(None, "--token", help="bearer token (default $SOLBENCH_TOKEN)"),
    wait: bool = typer.Option(False, "--wait", help="wait for the records and print them as `solbench run` does"),
    workload: list[str] = typer.Option(None, "--workload", help="run only this workload (repeatable)"),
    small: bool = typer.Option(False, "--small", help="one workload 'small' at the problem's test_axes"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
) -> None:
    """Send a candidate to a `solbench serve` service; with --wait, print its results table. Exit 0 only if all pass."""
    from solbench.serve import Client

    client = Client(server, token)
    made = client.submit(file, problem, workload or [], small)
    url = f"{client.server}/submissions/{made['id']}"
    err_console.print(f"submission #{made['id']} queued: {plain(url)}", highlight=False)
    if not wait:
        typer.echo(made["id"])
        return
    _wait(client, made["id"], url, quiet)


def _wait(client: object, sub_id: int, url: str, quiet: bool) -> None:
    import time

    started, seen = time.monotonic(), []

    def on_record(r: dict) -> None:
        seen.append(r)
        if not quiet:
            record = read_record({k: v for k, v in r.items() if not k.startswith("_")})
            err_console.print(progress_line(record, len(seen), 0, time.monotonic() - started), markup=False,
                              highlight=False, soft_wrap=True)

    sub = client.wait(sub_id, on_record)  # type: ignore[attr-defined]
    records = [read_record({k: v for k, v in r.items() if not k.startswith("_")})  # a server's: any version
               for r in sub["records"]]
    for table in results_tables(records):
        console.print(table)
    if sub["state"] != "done":
        raise SolbenchError(f"submission #{sub_id} {sub['state']}: {sub.get('error') or 'no reason given'} ({url})")
    passed = sum(r.status == Status.PASSED.value for r in records)
    device = records[0].device_type if records else "-"
    spec = records[0].gpu_spec if records else "-"
    console.print(f"{passed} of {len(records)} passed on {plain(device)} (spec {plain(spec)}); submission "
                  f"#{sub_id}: {plain(url)}", highlight=False)
    if not records or passed < len(records):
        raise typer.Exit(1)
