"""Watch jobs: an idle pipeline whose sources cannot say when input comes is watched.

A run job marked ``watch`` runs no Spark: it looks at the pipeline's sources
(offsets moved on the broker) from its committed offsets and ends ``idle``, due
at once, when input arrives; the scheduler then starts the pipeline's real job.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("watch", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    # A watch job in progress reads as the idle job it stands for.
    op.execute("UPDATE jobs SET state = 'idle' WHERE watch AND state NOT IN "
               "('stopped', 'finished', 'failed', 'idle')")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("watch")
