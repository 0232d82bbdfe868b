"""Tokens, submissions (the durable queue) and results (one row per record, unique per submission,
problem, workload and candidate: a submission run again after a crash never scores a workload twice)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("per_day", sa.Integer, nullable=False),
        sa.Column("max_pending", sa.Integer, nullable=False),
        sa.Column("revoked", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("tokens.id"), nullable=False, index=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("candidate", sa.String(64), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("problems", sa.Text, nullable=False),
        sa.Column("workloads", sa.Text, nullable=False),
        sa.Column("small", sa.Boolean, nullable=False),
        sa.Column("uploaded", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False, index=True),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
        sa.Column("claimed_by", sa.String(80), nullable=True, index=True),
        sa.Column("heartbeat_at", sa.Float, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("progress", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False, index=True),
        sa.Column("problem", sa.String(200), nullable=False, index=True),
        sa.Column("workload", sa.String(200), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("gpu", sa.String(200), nullable=True),
        sa.Column("sol", sa.Float, nullable=True),
        sa.Column("time_s", sa.Float, nullable=True),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("submission_id", "problem", "workload", "candidate", name="one_record_per_key"),
    )


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("submissions")
    op.drop_table("tokens")
