"""The `solbench` command line: a thin layer over the public API.

Each group of commands lives in its own module and registers itself on ``app``. A user's mistake
(a SolbenchError) prints one line and exits 2 (validation failures exit 1); never a traceback.
"""

from __future__ import annotations

import sys

import typer

from ..errors import SolbenchError

app = typer.Typer(
    name="solbench",
    help="Score GPU kernels against the hardware's speed of light.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Command modules register themselves on `app` when imported.
from . import foundation  # noqa: E402,F401

for _optional in ("engine", "present", "calibrate"):
    try:
        __import__(f"{__name__}.{_optional}")
    except ModuleNotFoundError as _err:  # a module not written yet; anything else is a real error
        if _err.name != f"{__name__}.{_optional}":
            raise


def main() -> None:
    try:
        app(standalone_mode=True)
    except SolbenchError as err:
        typer.secho(f"error: {err}", err=True, fg="red")
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        sys.exit(130)
