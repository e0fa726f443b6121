"""Tenants, their API keys, pipelines and immutable pipeline versions.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.schema import SchemaItem

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(length=26)


def _timestamp(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _tenant_id(table: str) -> list[SchemaItem]:
    return [
        sa.Column("tenant_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"],
                                name=op.f(f"fk_{table}_tenant_id_tenants"), ondelete="CASCADE"),
    ]


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=64), nullable=False),
        _timestamp("created_at"),
        _timestamp("rotated_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        *_tenant_id("api_keys"),
        sa.CheckConstraint("role IN ('admin', 'developer', 'viewer')",
                           name=op.f("ck_api_keys_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"])
    op.create_table(
        "pipelines",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.String(length=1000), nullable=False),
        sa.Column("parallelism", sa.Integer(), nullable=False),
        sa.Column("checkpoint_interval_ms", sa.Integer(), nullable=True),
        sa.Column("current_version", sa.Integer(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        *_tenant_id("pipelines"),
        sa.CheckConstraint("current_version >= 1", name=op.f("ck_pipelines_current_version")),
        sa.CheckConstraint("parallelism >= 1", name=op.f("ck_pipelines_parallelism")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipelines")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("uq_pipelines_tenant_id_id")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_pipelines_tenant_id_name")),
    )
    op.create_index(op.f("ix_pipelines_tenant_id"), "pipelines", ["tenant_id"])
    op.create_table(
        "pipeline_versions",
        sa.Column("id", ID, nullable=False),
        sa.Column("pipeline_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sql", sa.Text(), nullable=False),
        sa.Column("sql_sha256", sa.String(length=64), nullable=False),
        _timestamp("created_at"),
        sa.Column("created_by_key_id", ID, nullable=True),
        *_tenant_id("pipeline_versions"),
        sa.CheckConstraint("version >= 1", name=op.f("ck_pipeline_versions_version")),
        sa.ForeignKeyConstraint(
            ["created_by_key_id"], ["api_keys.id"],
            name=op.f("fk_pipeline_versions_created_by_key_id_api_keys"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "pipeline_id"], ["pipelines.tenant_id", "pipelines.id"],
            name=op.f("fk_pipeline_versions_tenant_id_pipeline_id_pipelines"),
            ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipeline_versions")),
        sa.UniqueConstraint("pipeline_id", "version",
                            name=op.f("uq_pipeline_versions_pipeline_id_version")),
    )
    op.create_index(op.f("ix_pipeline_versions_tenant_id"), "pipeline_versions", ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pipeline_versions_tenant_id"), table_name="pipeline_versions")
    op.drop_table("pipeline_versions")
    op.drop_index(op.f("ix_pipelines_tenant_id"), table_name="pipelines")
    op.drop_table("pipelines")
    op.drop_index(op.f("ix_api_keys_tenant_id"), table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("tenants")
