"""The jinja2 environment for solbench's HTML output, and text cleaning for every output format.

Record fields are untrusted (a candidate chooses its own name and writes its own log), so HTML is
rendered with autoescaping on and the templates never mark record text safe; the page also carries
a Content-Security-Policy that forbids scripts and any fetch, as a second line of defence.
"""

from __future__ import annotations

import html as _html
import math
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from solbench.units import si, sol_text

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


def clean_text(value: object, limit: int | None = None) -> str:
    """A string safe to print on a terminal: control characters (ANSI escapes included) shown as
    U+FFFD, newlines kept only when ``limit`` allows multi-line text."""
    s = "" if value is None else str(value)
    cut = len(s) - limit if limit is not None and len(s) > limit else 0
    if cut:
        s = s[:limit]  # cut first: a candidate's log can be long
    if not s.isprintable():  # the common case needs no look at each character
        s = "".join(ch if ch in "\n\t" or unicodedata.category(ch)[0] != "C" else "\ufffd" for ch in s)
    return s + f"... [{cut} more characters]" if cut else s


def one_line(value: object, limit: int = 200) -> str:
    return " ".join(clean_text(value, limit).split())


def markdown_cell(value: object) -> str:
    """Markdown table cell: one line, pipes escaped, HTML escaped (renderers pass raw HTML through)."""
    return _html.escape(one_line(value)).replace("|", "\\|")


def markdown_text(value: object, limit: int = 300) -> str:
    """Markdown prose (a heading, a list item): one line, HTML escaped, quotes kept readable."""
    return _html.escape(one_line(value, limit), quote=False)


def spreadsheet_safe(value: object) -> object:
    """CSV cell: text starting with = + - @ is prefixed with ' so spreadsheets do not run it."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def fmt_share(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f}%"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template is HTML; record text must never become markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(sol=sol_text, share=fmt_share, si=si, clean=clean_text, one_line=one_line)
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
