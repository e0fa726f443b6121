"""Named Spark clusters: the cluster a pipeline was moved to, and the one each job ran on.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NAME = sa.String(length=63)


def upgrade() -> None:
    # Null in both: a pipeline never moved, and jobs from before clusters had names, run
    # on the deployment's default cluster.
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("cluster", NAME, nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("cluster", NAME, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("cluster")
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("cluster")
