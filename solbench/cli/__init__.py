"""The `solbench` command line: a thin layer over the public API.

Each group of commands lives in its own module and registers itself on ``app`` (``_app.py``) when
imported; importing this package registers them all.
"""

from __future__ import annotations

from solbench.cli import calibrate, compare, engine, foundation, interop, model, present, profile, serve  # noqa: F401  (registration)
from solbench.cli._app import app, main

__all__ = ["app", "main"]
