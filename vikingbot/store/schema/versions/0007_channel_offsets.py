"""Polled chat channels' offsets in the database (several gateways, issue 14).

``channel_offsets``: per channel ("telegram:default") the next update id to fetch.
The gateway polling Telegram writes it as it handles updates; a gateway that takes
the channel over after a failover starts there, so no update is answered twice and
none is skipped (``vikingbot.channels.telegram``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import vikingbot.store.types

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "channel_offsets",
        sa.Column("channel", sa.String(length=200), nullable=False),
        sa.Column("next_update", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("channel"),
    )
