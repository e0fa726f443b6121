"""Usage metering, billing and plans: what each job used per minute, the meter's
readings, closed invoices, budgets, the plan each tenant is on, and the billing role.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ID = sa.String(length=26)


ROLES_BEFORE = ("admin", "developer", "viewer")
ROLES_AFTER = (*ROLES_BEFORE, "billing")


def _allow_roles(roles: tuple[str, ...]) -> None:
    """Replace the API keys' role check (SQLite: by copying the table)."""
    name = op.f("ck_api_keys_role")
    check = f"role IN ({', '.join(repr(role) for role in roles)})"
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("api_keys", recreate="always") as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, check)
    else:
        op.drop_constraint(name, "api_keys", type_="check")
        op.create_check_constraint(name, "api_keys", check)


def _tenant(table: str) -> sa.Column[str]:
    return sa.Column("tenant_id", ID, sa.ForeignKey(
        "tenants.id", ondelete="CASCADE", name=op.f(f"fk_{table}_tenant_id_tenants")),
        nullable=False)


def upgrade() -> None:
    _allow_roles(ROLES_AFTER)
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("plan", sa.String(63), nullable=True))
    op.create_table(
        "usage_records",
        sa.Column("tenant_id", ID, sa.ForeignKey(
            "tenants.id", ondelete="CASCADE", name=op.f("fk_usage_records_tenant_id_tenants")),
            nullable=False),
        sa.Column("job_id", ID, nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("dimension", sa.String(32), nullable=False),
        sa.Column("pipeline_id", ID, nullable=True),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "minute", "dimension",
                                name=op.f("pk_usage_records")),
    )
    op.create_index(op.f("ix_usage_records_tenant_id"), "usage_records", ["tenant_id"])
    op.create_index(op.f("ix_usage_records_pipeline_id"), "usage_records", ["pipeline_id"])
    op.create_table(
        "meter_readings",
        sa.Column("unit", sa.String(200), nullable=False),
        sa.Column("tenant_id", ID, sa.ForeignKey(
            "tenants.id", ondelete="CASCADE", name=op.f("fk_meter_readings_tenant_id_tenants")),
            nullable=False),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("jobs", sa.JSON(), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("unit", name=op.f("pk_meter_readings")),
    )
    op.create_index(op.f("ix_meter_readings_tenant_id"), "meter_readings", ["tenant_id"])
    op.create_table(
        "invoices",
        _tenant("invoices"),
        sa.Column("period", sa.String(7), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "period", name=op.f("pk_invoices")),
    )
    op.create_table(
        "budgets",
        _tenant("budgets"),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.Column("thresholds", sa.JSON(), nullable=False),
        sa.Column("hard_stop", sa.Boolean(), nullable=False),
        sa.Column("alerts", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_budgets")),
    )


def downgrade() -> None:
    op.drop_table("budgets")
    op.drop_table("invoices")
    op.drop_table("meter_readings")
    op.drop_table("usage_records")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("plan")
    # Before this revision there are no bills to read: a billing key becomes a viewer.
    op.execute("UPDATE api_keys SET role = 'viewer' WHERE role = 'billing'")
    _allow_roles(ROLES_BEFORE)
