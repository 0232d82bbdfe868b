"""Small helpers shared by the command modules, and the one gate between text and the terminal.

Names, reasons, paths and logs come from files and candidates that anyone may write. Everything the
commands print goes through :class:`SafeConsole` (rich output) or :func:`echo` (plain output), which
show control characters (ANSI and OSC escape sequences, carriage returns, bidirectional overrides) as
U+FFFD, so no file can move the cursor, retitle the window or hide text. Untrusted text put inside
rich markup is escaped with :func:`plain` first, so it cannot open a ``[link=...]`` either.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from enum import Enum
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from solbench.errors import SolbenchError
from solbench.present.markup import clean_text
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
    from pathlib import Path

    for p in paths:
        if not Path(str(p)).exists():
            raise SolbenchError(f"{p}: no such file or folder: {hint}")


def fmt_time(t: float | None) -> str:
    return si(t, "s")
