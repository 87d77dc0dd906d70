"""Inbound messages kept until answered (the webhook's 202 survives a crash).

``inbound_messages``: see ``vikingbot.channels.inbound``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import vikingbot.store.types

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbound_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("channel", sa.String(length=50), nullable=False),
        sa.Column("channel_id", sa.String(length=200), nullable=False),
        sa.Column("chat_id", sa.String(length=300), nullable=False),
        sa.Column("sender_id", sa.String(length=200), nullable=False),
        sa.Column("thread", sa.String(length=300), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("received_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("taker", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("answered_at", vikingbot.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_inbound_messages_status", "inbound_messages", ["status"], unique=False)
