"""Tenants' Python UDFs, each with immutable, numbered source versions.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ID = sa.String(length=26)


def _owned(table: str) -> list[SchemaItem]:
    """The tenant column and its foreign key, as every tenant-owned table has them."""
    return [
        sa.Column("tenant_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f(f"fk_{table}_tenant_id_tenants"), ondelete="CASCADE"),
    ]


def upgrade() -> None:
    op.create_table(
        "udfs",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        *_owned("udfs"),
        sa.CheckConstraint("current_version >= 1", name=op.f("ck_udfs_current_version")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_udfs")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("uq_udfs_tenant_id_id")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_udfs_tenant_id_name")),
    )
    op.create_index(op.f("ix_udfs_tenant_id"), "udfs", ["tenant_id"])
    op.create_table(
        "udf_versions",
        sa.Column("id", ID, nullable=False),
        sa.Column("udf_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by_key_id", ID, nullable=True),
        *_owned("udf_versions"),
        sa.CheckConstraint("version >= 1", name=op.f("ck_udf_versions_version")),
        sa.ForeignKeyConstraint(
            ["created_by_key_id"], ["api_keys.id"],
            name=op.f("fk_udf_versions_created_by_key_id_api_keys"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "udf_id"], ["udfs.tenant_id", "udfs.id"],
            name=op.f("fk_udf_versions_tenant_id_udf_id_udfs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_udf_versions")),
        sa.UniqueConstraint("udf_id", "version", name=op.f("uq_udf_versions_udf_id_version")),
    )
    op.create_index(op.f("ix_udf_versions_tenant_id"), "udf_versions", ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_udf_versions_tenant_id"), table_name="udf_versions")
    op.drop_table("udf_versions")
    op.drop_index(op.f("ix_udfs_tenant_id"), table_name="udfs")
    op.drop_table("udfs")
