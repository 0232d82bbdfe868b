"""The typer application every command module registers on, and the entry point that runs it.

A user's mistake (a SolbenchError) prints one line and exits 2 (validation failures exit 1); never a
traceback. Ctrl-C prints one line and exits 130.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from solbench._version import __version__
from solbench.errors import INTERRUPTED, SolbenchError

# Help shows a word for what an option takes, never a Python type (typer's default is <list[Path]>).
_WORDS = {int: "N", float: "NUMBER", str: "TEXT", bool: ""}


def _metavar(param: Any) -> str:
    """``N``, ``NUMBER``, ``TEXT``, ``PATH``, ``a|b|c``; an argument's own name; nothing for a flag."""
    if getattr(param, "is_flag", False):
        return ""
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.2x; older ones carry click's ``type``
    if param.param_type_name == "argument":
        return param.name.upper()  # the usage line adds "..." to one that takes several
    if desc is not None and desc.is_choice:
        word = "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    elif desc is not None:
        inner = (getattr(desc.annotation, "__args__", None) or (desc.annotation,))[0]
        word = "PATH" if desc.is_path or inner is Path else _WORDS.get(inner, "TEXT")
    else:
        word = {"integer": "N", "float": "NUMBER", "path": "PATH"}.get(getattr(param.type, "name", ""), "TEXT")
    return word


def readable_help(command: Any) -> None:
    """Give every parameter of ``command`` (and its subcommands) a plain metavar, no type column."""
    for param in command.params:
        if param.metavar is None:
            param.metavar = _metavar(param)
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None  # type: ignore[attr-defined]  # the name says it
    original = command.get_help_option

    def help_option(ctx: Any, original: Any = original) -> Any:
        option = original(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option  # type: ignore[method-assign]
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


class SolbenchGroup(TyperGroup):
    """The top command group: its commands' help is made readable once they are built."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        readable_help(self)


app = typer.Typer(
    name="solbench",
    help="Score GPU kernels against the hardware's speed of light.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=SolbenchGroup,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"solbench {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Score GPU kernels against the hardware's speed of light."""


ERROR_CHARS = 2000  # an error quotes problem code's messages (a hook's may be megabytes): cut there


def interrupted() -> NoReturn:
    """Ctrl-C: one line on standard error, exit 130."""
    typer.secho(INTERRUPTED, err=True)  # the entry point's line: one wording
    sys.exit(130)


def main() -> None:
    try:
        app(standalone_mode=True)
    except SolbenchError as err:  # its text may quote a file or a candidate: cleaned of control characters
        from solbench.cli._common import safe_text

        typer.secho(f"error: {safe_text(err, ERROR_CHARS)}", err=True, fg="red")
        sys.exit(2)
    except KeyboardInterrupt:
        interrupted()
    except SystemExit as done:
        if done.code == 130:  # typer turns a KeyboardInterrupt into a silent Exit(130)
            interrupted()
        raise
