"""Tenants get a sandbox number: their OS user is the deployment's base uid plus it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("sandbox_number", sa.Integer(), nullable=True))
        batch.create_unique_constraint(op.f("uq_tenants_sandbox_number"), ["sandbox_number"])


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_constraint(op.f("uq_tenants_sandbox_number"), type_="unique")
        batch.drop_column("sandbox_number")
