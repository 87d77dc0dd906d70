"""Several gateways on one database: outbox send leases and the gateways registry.

``outbox.sender``/``outbox.lease_until``: which gateway is sending a pending row,
until when (``vikingbot.delivery.outbox``). ``gateways``: one row per running
gateway (``vikingbot.gateway.registry``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import vikingbot.store.types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outbox", sa.Column("sender", sa.String(length=200), nullable=True))
    op.add_column(
        "outbox",
        sa.Column("lease_until", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "gateways",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=200), nullable=True),
        sa.Column("version", sa.String(length=50), nullable=True),
        sa.Column("started_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("seen_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gateways_seen_at", "gateways", ["seen_at"], unique=False)
