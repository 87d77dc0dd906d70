"""Alembic's environment for the state database.

vikingbot runs the migrations itself (``vikingbot.store.migrations.migrate``) on an
open connection, passed in ``config.attributes["connection"]``. For writing a new
revision by hand, the ``alembic`` command works too: see docs/architecture.md
("Adding a migration").
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from vikingbot.store.tables import metadata

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
        on_version_apply=config.attributes.get("on_version_apply"),
    )
    with context.begin_transaction():
        context.run_migrations()


shared = config.attributes.get("connection")
if shared is not None:
    _run(shared)
else:
    # The command line: `alembic -c vikingbot/store/schema/alembic.ini -x url=sqlite:///x.db ...`
    url = context.get_x_argument(as_dictionary=True).get("url", "sqlite:///vikingbot-dev.db")
    engine = create_engine(url)
    with engine.connect() as conn:
        _run(conn)
        conn.commit()
    engine.dispose()
