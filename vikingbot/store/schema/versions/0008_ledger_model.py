"""The heartbeat ledger names the model that answered (issue 47, model fallbacks).

``heartbeat_runs.model``: ``provider/model`` of the last answer of a run; during an
outage of the configured model, the fallback's (``vikingbot.providers.fallback``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("heartbeat_runs") as batch:
        batch.add_column(sa.Column("model", sa.String(length=400), nullable=True))
