"""A pipeline's autoscale range, and when and why the autoscaler last changed its
parallelism.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as table:
        table.add_column(sa.Column("autoscale_min", sa.Integer(), nullable=True))
        table.add_column(sa.Column("autoscale_max", sa.Integer(), nullable=True))
        table.add_column(sa.Column("autoscaled_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("autoscale_reason", sa.String(300), nullable=True))
        table.create_check_constraint(
            op.f("ck_pipelines_autoscale"), "(autoscale_min IS NULL AND autoscale_max IS NULL) OR "
                         "(autoscale_min >= 1 AND autoscale_max >= autoscale_min)")


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as table:
        table.drop_constraint(op.f("ck_pipelines_autoscale"), type_="check")
        table.drop_column("autoscale_reason")
        table.drop_column("autoscaled_at")
        table.drop_column("autoscale_max")
        table.drop_column("autoscale_min")
