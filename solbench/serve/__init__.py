"""`solbench serve`: a submission service (HTTP API, durable queue, database, live leaderboard) in
front of the same engine as `solbench run`; and the client that `solbench submit` uses."""

from __future__ import annotations

from solbench._lazy import lazy_getattr

# What the other layers use, by the module that defines it; a module is loaded on first use, so importing
# the package loads none of them.
_HOME = {
    "Limits": "app",
    "Client": "client",
    "ServeConfig": "server",
    "open_store": "server",
    "queue_baselines": "server",
    "serve": "server",
}
__all__ = sorted(_HOME)


__getattr__ = lazy_getattr(__name__, _HOME)
