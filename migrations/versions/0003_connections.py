"""Connection profiles and connection tables (secret options stored as ciphertext).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.String(length=26)
NAME = sa.String(length=63)


def _common(table: str) -> list[sa.schema.SchemaItem]:
    """Columns and constraints both tables share: id, tenant, name, options, timestamps."""
    return [
        sa.Column("id", ID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("connector", NAME, nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("secrets", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f(f"fk_{table}_tenant_id_tenants"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f(f"uq_{table}_tenant_id_name")),
    ]


def upgrade() -> None:
    op.create_table(
        "connection_profiles",
        *_common("connection_profiles"),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("uq_connection_profiles_tenant_id_id")),
    )
    op.create_index(op.f("ix_connection_profiles_tenant_id"), "connection_profiles",
                    ["tenant_id"])
    op.create_table(
        "connection_tables",
        *_common("connection_tables"),
        sa.Column("profile_id", ID, nullable=True),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "profile_id"],
            ["connection_profiles.tenant_id", "connection_profiles.id"],
            name=op.f("fk_connection_tables_tenant_id_profile_id_connection_profiles")),
    )
    op.create_index(op.f("ix_connection_tables_tenant_id"), "connection_tables", ["tenant_id"])
    op.create_index(op.f("ix_connection_tables_profile_id"), "connection_tables",
                    ["profile_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_connection_tables_profile_id"), table_name="connection_tables")
    op.drop_index(op.f("ix_connection_tables_tenant_id"), table_name="connection_tables")
    op.drop_table("connection_tables")
    op.drop_index(op.f("ix_connection_profiles_tenant_id"), table_name="connection_profiles")
    op.drop_table("connection_profiles")
