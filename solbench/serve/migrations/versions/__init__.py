"""Schema versions, oldest first (alembic revisions)."""
