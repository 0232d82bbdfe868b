"""Small helpers shared by the command modules."""

from __future__ import annotations

from rich.console import Console

from solbench.units import si

console = Console()
err_console = Console(stderr=True)

def fmt_time(t: float | None) -> str:
    return si(t, "s")
