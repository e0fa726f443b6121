"""Deleted pipelines' names: usage outlives its pipeline, and invoices name it as it was.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deleted_pipelines",
        sa.Column("tenant_id", sa.String(26), sa.ForeignKey(
            "tenants.id", ondelete="CASCADE",
            name=op.f("fk_deleted_pipelines_tenant_id_tenants")), nullable=False),
        sa.Column("pipeline_id", sa.String(26), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pipeline_id", name=op.f("pk_deleted_pipelines")),
    )
    op.create_index(op.f("ix_deleted_pipelines_tenant_id"), "deleted_pipelines",
                    ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_deleted_pipelines_tenant_id"), table_name="deleted_pipelines")
    op.drop_table("deleted_pipelines")
