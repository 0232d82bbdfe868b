"""`solbench serve`: a submission service (HTTP API, durable queue, database, live leaderboard) in
front of the same engine as `solbench run`; and the client that `solbench submit` uses."""

from __future__ import annotations

__all__: list[str] = []
