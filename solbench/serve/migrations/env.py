"""Alembic's entry point for the service: upgrades the connection the store hands over (never a URL
from a config file), so the migrations run inside the store's own engine and transaction."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
