"""The service's database migrations (alembic): ``env.py`` and one module per schema version."""
