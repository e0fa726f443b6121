"""Jobs (runs of a pipeline) with their state history, checkpoints and errors;
a pipeline's desired state.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(length=26)
JOB_STATES = ("created", "starting", "running", "stopping", "restarting",
              "stopped", "finished", "failed")
_CHILDREN = ("job_events", "job_checkpoints", "job_errors")


def _timestamp(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _owned_by_job(table: str) -> list[SchemaItem]:
    """The tenant and job columns of a job's child table, and their foreign keys."""
    return [
        sa.Column("id", ID, nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f(f"fk_{table}_tenant_id_tenants"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id", "job_id"], ["jobs.tenant_id", "jobs.id"],
                                name=op.f(f"fk_{table}_tenant_id_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
    ]


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("desired_state", sa.String(length=16), nullable=False,
                                   server_default="running"))
        batch.add_column(sa.Column("stop_mode", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("restart_generation", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("restart_with_state", sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
        batch.create_check_constraint("desired_state", "desired_state IN ('running', 'stopped')")
    # The defaults only filled existing rows; the models set every value from now on.
    with op.batch_alter_table("pipelines") as batch:
        for column in ("desired_state", "restart_generation", "restart_with_state"):
            batch.alter_column(column, server_default=None)
    op.create_table(
        "jobs",
        sa.Column("id", ID, nullable=False),
        sa.Column("pipeline_id", ID, nullable=True),
        sa.Column("pipeline_version", sa.Integer(), nullable=True),
        sa.Column("sql", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("parallelism", sa.Integer(), nullable=False),
        sa.Column("checkpoint_interval_ms", sa.Integer(), nullable=True),
        sa.Column("restart_generation", sa.Integer(), nullable=False),
        sa.Column("stop_mode", sa.String(length=16), nullable=True),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("handle", sa.JSON(), nullable=True),
        sa.Column("channel_url", sa.String(length=1000), nullable=True),
        sa.Column("channel_cursor", sa.String(length=64), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        _timestamp("next_attempt_at", nullable=True),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("last_epoch", sa.BigInteger(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        _timestamp("heartbeat_at", nullable=True),
        _timestamp("created_at"),
        _timestamp("started_at", nullable=True),
        _timestamp("ended_at", nullable=True),
        _timestamp("updated_at"),
        sa.Column("tenant_id", ID, nullable=False),
        sa.CheckConstraint("kind IN ('run', 'preview')", name=op.f("ck_jobs_kind")),
        sa.CheckConstraint(f"state IN ({', '.join(repr(s) for s in JOB_STATES)})",
                           name=op.f("ck_jobs_state")),
        sa.CheckConstraint("parallelism >= 1", name=op.f("ck_jobs_parallelism")),
        sa.CheckConstraint("(kind = 'run' AND pipeline_id IS NOT NULL AND pipeline_version IS NOT "
                           "NULL) OR (kind = 'preview' AND sql IS NOT NULL)",
                           name=op.f("ck_jobs_source")),
        sa.ForeignKeyConstraint(["tenant_id", "pipeline_id"],
                                ["pipelines.tenant_id", "pipelines.id"],
                                name=op.f("fk_jobs_tenant_id_pipeline_id_pipelines"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f("fk_jobs_tenant_id_tenants"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("uq_jobs_tenant_id_id")),
    )
    op.create_index(op.f("ix_jobs_pipeline_id"), "jobs", ["pipeline_id"])
    op.create_index(op.f("ix_jobs_tenant_id"), "jobs", ["tenant_id"])
    op.create_table(
        "job_events",
        *_owned_by_job("job_events"),
        _timestamp("at"),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_table(
        "job_checkpoints",
        *_owned_by_job("job_checkpoints"),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        _timestamp("committed_at"),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("state_bytes", sa.BigInteger(), nullable=False),
        sa.Column("rows_in", sa.BigInteger(), nullable=False),
        sa.Column("rows_out", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("job_id", "epoch", name=op.f("uq_job_checkpoints_job_id_epoch")),
    )
    op.create_table(
        "job_errors",
        *_owned_by_job("job_errors"),
        _timestamp("at"),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    for table in _CHILDREN:
        op.create_index(op.f(f"ix_{table}_job_id"), table, ["job_id"])
        op.create_index(op.f(f"ix_{table}_tenant_id"), table, ["tenant_id"])


def downgrade() -> None:
    for table in _CHILDREN:
        op.drop_index(op.f(f"ix_{table}_tenant_id"), table_name=table)
        op.drop_index(op.f(f"ix_{table}_job_id"), table_name=table)
        op.drop_table(table)
    op.drop_index(op.f("ix_jobs_tenant_id"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_pipeline_id"), table_name="jobs")
    op.drop_table("jobs")
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_constraint("desired_state", type_="check")
        for column in ("restart_with_state", "restart_generation", "stop_mode", "desired_state"):
            batch.drop_column(column)
