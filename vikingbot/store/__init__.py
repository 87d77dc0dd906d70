"""The state database: run ledger, audit log, schedule state, outbox, search index.

Open it with ``StateStore.open(url)``; the tables are in ``vikingbot.store.tables``
and the schema history in ``vikingbot.store.migrations``.
"""

from vikingbot.store.db import StateStore
from vikingbot.store.migrations import LATEST_VERSION

__all__ = ["LATEST_VERSION", "StateStore"]
