"""Small helpers shared by the command modules, and the one gate between text and the terminal.

Names, reasons, paths and logs come from files and candidates that anyone may write. Everything the
commands print goes through :class:`SafeConsole` (rich output) or :func:`echo` (plain output), which
show control characters (ANSI and OSC escape sequences, carriage returns, bidirectional overrides) as
U+FFFD, so no file can move the cursor, retitle the window or hide text. Untrusted text put inside
rich markup is escaped with :func:`plain` first, so it cannot open a ``[link=...]`` either.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import typing
from collections.abc import Callable, Iterable
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from solbench.engine import GUARDS_OFF_FLAG, RunOptions
from solbench.errors import SolbenchError
from solbench.present import clean_text, one_line
from solbench.units import si


class ListFormat(str, Enum):
    """--format of the commands that print rows: a rich table, markdown or JSON."""

    table = "table"
    markdown = "markdown"
    json = "json"


def json_text(data: Any) -> str:
    """Indented JSON that any parser reads: a non-finite float (an intensity of x/0) becomes null, not
    the ``Infinity`` or ``NaN`` that strict JSON has no word for."""
    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    return json.dumps(finite(data), indent=2, allow_nan=False, default=str)


class SafeConsole(Console):
    """A rich Console whose printed text never carries a control character.

    Rich's own styles and cursor moves (control segments) pass; each other segment's text is cleaned
    just before it is written (``_render_buffer`` is where every print, table and progress bar ends).
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(safe_text(seg.text), seg.style) for seg in buffer
        )


def safe_text(value: object, limit: int | None = None) -> str:
    """``value`` as text with its control characters shown as U+FFFD (newlines and tabs kept), cut
    after ``limit`` characters."""
    return clean_text(value, limit)


def plain(value: object) -> str:
    """Untrusted text to put in a rich markup string or table cell: cleaned, its ``[`` escaped."""
    return escape(safe_text(value))


def echo(text: object, err: bool = False) -> None:
    """``typer.echo`` of cleaned text (markdown and plain listings)."""
    typer.echo(safe_text(text), err=err)


# Piped or redirected output (a log, `| less`) is not cut at 80 columns: tables get this width unless
# $COLUMNS says otherwise; a terminal's own width is used as it is.
PIPED_WIDTH = 200


def _console(stderr: bool = False) -> SafeConsole:
    out = SafeConsole(stderr=stderr)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = PIPED_WIDTH
    return out


console = _console()
err_console = _console(stderr=True)


def require_results(paths: Iterable[object], hint: str = "pass result files (.jsonl) or folders of them") -> None:
    """One clear error for the first results path that does not exist (readers would only warn)."""
    for p in paths:
        if not Path(str(p)).exists():
            raise SolbenchError(f"{p}: no such file or folder: {hint}")


def fmt_time(t: float | None) -> str:
    return si(t, "s")


def plain_line(line: str) -> None:
    """A line for the user on standard error, as it is (no markup): a shipped candidate skipped, ..."""
    err_console.print(line, markup=False, highlight=False)


# --- results files: the commands that read records ---------------------------------------------------
DEFAULT_RESULTS = Path("results")
MAX_WARNINGS_SHOWN = 10


def load(paths: list[Path] | None):
    """The results frame of these files or folders (default: results/), its warnings shown."""
    from solbench.present import load_results

    require_results(paths or [])
    if not paths and not DEFAULT_RESULTS.is_dir():
        raise SolbenchError("no results/ folder here: pass result files (.jsonl), or run `solbench run` first")
    df = load_results(paths or [DEFAULT_RESULTS], warn=False)
    warn(df.attrs.get("warnings", []))  # kept in attrs too: the HTML and JSON outputs list them
    return df


def warn(lines: list[str]) -> None:
    """One ``warning:`` line each on stderr, cleaned and cut; past MAX_WARNINGS_SHOWN, a count."""
    for w in lines[:MAX_WARNINGS_SHOWN]:
        err_console.print(Text(f"warning: {one_line(w, 300)}", style="yellow"), soft_wrap=True)
    if len(lines) > MAX_WARNINGS_SHOWN:
        err_console.print(Text(f"... and {len(lines) - MAX_WARNINGS_SHOWN} more warnings", style="yellow"))


def done(what: str, path: Path) -> None:
    """``what: path`` on standard output: what a command wrote, and where."""
    console.print(Text(f"{what}: {path}"))


# --- run settings as options: every flag, default and help comes from RunOptions ---------------------
# A field's flag is ``--`` and its name without ``_s``, ``-`` for ``_``; these say otherwise.
RUN_FLAGS = {"cooldown_max_s": "--cooldown", "all_streams": "--all-streams/--events-only", "guards": " /--no-guards",
             "edge_rounds": " /--no-edge", "warm_shapes": " /--no-warm", "worker_reads": "--worker-read"}
RUN_HELP = {"guards": "run without the guards, only to measure what they add; never for untrusted code (every "
                      f"record is flagged {GUARDS_OFF_FLAG})",
            "worker_reads": RunOptions.model_fields["worker_reads"].description + " (repeatable)"}


def _run_option(name: str) -> tuple[Any, Any]:
    """The command-line type and typer option of a RunOptions field."""
    field = RunOptions.model_fields[name]
    kind = field.annotation
    if typing.get_origin(kind) is tuple:  # repeatable
        kind = list[typing.get_args(kind)[0]]
    elif type(None) in typing.get_args(kind):  # optional: the flag's own type
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    flag = RUN_FLAGS.get(name, "--" + name.removesuffix("_s").replace("_", "-"))
    default = None if field.default_factory is not None or typing.get_origin(kind) is list else field.default
    return kind, typer.Option(default, flag, help=RUN_HELP.get(name, field.description),
                              show_default=not flag.startswith(" /"))


def run_settings(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command decorator: the command takes these RunOptions fields (all when none are named) as options,
    in place of its ``settings`` parameter, and receives the ones given as ``settings``, a dict by field name."""
    fields = names or tuple(RunOptions.model_fields)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        options = {name: _run_option(name) for name in fields}
        own = list(inspect.signature(command).parameters.values())
        at = [p.name for p in own].index("settings")
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
                 for name, (kind, option) in options.items()]

        @functools.wraps(command)
        def with_settings(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in fields}
            given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items() if v not in (None, [])}
            return command(**kwargs, settings=given)

        with_settings.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[:at]] + added
            + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at + 1:]])
        with_settings.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != "settings"},
                                         **{name: kind for name, (kind, _) in options.items()}}
        return with_settings

    return decorate
