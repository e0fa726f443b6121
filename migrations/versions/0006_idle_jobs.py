"""Idle jobs: a job that stopped for want of input, and when its input is due again.

A pipeline with no input for its idle period stops after a commit and releases its
compute; its job ends ``idle`` (not ``stopped``: the pipeline still wants to run)
with ``next_attempt_at`` saying when its sources will have input again, and the
scheduler starts a new job then.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BEFORE = ("created", "starting", "running", "stopping", "restarting",
          "stopped", "finished", "failed")
AFTER = (*BEFORE, "idle")


def _states(states: tuple[str, ...]) -> str:
    return f"state IN ({', '.join(repr(s) for s in states)})"


def _allow(states: tuple[str, ...]) -> None:
    name = op.f("ck_jobs_state")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite cannot alter a constraint: the table is copied with the new one.
        with op.batch_alter_table("jobs", recreate="always") as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, _states(states))
    else:
        op.drop_constraint(name, "jobs", type_="check")
        op.create_check_constraint(name, "jobs", _states(states))


def upgrade() -> None:
    _allow(AFTER)


def downgrade() -> None:
    # An idle job of a pipeline that still wants to run reads as stopped before this.
    op.execute("UPDATE jobs SET state = 'stopped' WHERE state = 'idle'")
    _allow(BEFORE)
