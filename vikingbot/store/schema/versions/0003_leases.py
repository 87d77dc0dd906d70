"""Leases: claims on units of work shared by several gateways.

Was vikingbot's own migration 3 before Alembic (stamped 0003 when adopted).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import vikingbot.store.types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("acquired_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("done_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_leases_expires_at", "leases", ["expires_at"], unique=False)
