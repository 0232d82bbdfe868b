"""The typer application every command module registers on, and the entry point that runs it.

A user's mistake (a SolbenchError) prints one line and exits 2 (validation failures exit 1); never a
traceback.
"""

from __future__ import annotations

import sys

import typer

from solbench.errors import SolbenchError

app = typer.Typer(
    name="solbench",
    help="Score GPU kernels against the hardware's speed of light.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def main() -> None:
    try:
        app(standalone_mode=True)
    except SolbenchError as err:  # its text may quote a file or a candidate: cleaned of control characters
        from solbench.cli._common import safe_text

        typer.secho(f"error: {safe_text(err)}", err=True, fg="red")
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        sys.exit(130)
