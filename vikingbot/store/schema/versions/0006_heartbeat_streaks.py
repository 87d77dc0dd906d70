"""Heartbeat skip streaks: which skip each subject is repeating.

``heartbeat_streaks``: one row per workspace, session and entry whose latest
decision was a skip, with that skip's reason and detail. The run ledger
records a skip only when it starts a streak; with this table a restarted
gateway knows the streaks and does not write 10,000 rows again
(``vikingbot.heartbeat.state``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "heartbeat_streaks",
        sa.Column("workspace", sa.String(length=300), nullable=False),
        sa.Column("session", sa.String(length=600), nullable=False),
        sa.Column("entry", sa.String(length=500), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("workspace", "session", "entry"),
    )
