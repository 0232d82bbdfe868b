"""`solbench serve`: a submission service (HTTP API, durable queue, database, live leaderboard) in
front of the same engine as `solbench run`; and the client that `solbench submit` uses."""

from __future__ import annotations

import importlib
from typing import Any

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "Limits": "app",
    "Client": "client",
    "DEFAULT_DB": "server",
    "ServeConfig": "server",
    "open_store": "server",
    "queue_baselines": "server",
    "serve": "server",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:  # PEP 562
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_HOME[name]}")
    return module if _HOME[name] == name else getattr(module, name)
