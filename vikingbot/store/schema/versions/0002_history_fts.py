"""Full-text search over session history: FTS5 on SQLite, a GIN index on PostgreSQL.

Queries live in ``vikingbot.housekeeping.search``; on PostgreSQL they must use the
same expression, ``to_tsvector('simple', content)``, to hit the index.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_SQLITE = (
    # External-content FTS5 table over history_docs(content); rowid = history_docs.id.
    "CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5("
    "content, content='history_docs', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    # Triggers keep it in step with history_docs on insert, delete and update.
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_ai AFTER INSERT ON history_docs BEGIN "
    "INSERT INTO history_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_ad AFTER DELETE ON history_docs BEGIN "
    "INSERT INTO history_fts(history_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "END",
    "CREATE TRIGGER IF NOT EXISTS history_docs_fts_au AFTER UPDATE ON history_docs BEGIN "
    "INSERT INTO history_fts(history_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO history_fts(rowid, content) VALUES (new.id, new.content); END",
    # Rows indexed before this step (none on a fresh database) enter the index too.
    "INSERT INTO history_fts(history_fts) VALUES ('rebuild')",
)

_POSTGRES = (
    "CREATE INDEX IF NOT EXISTS ix_history_docs_fts ON history_docs "
    "USING GIN (to_tsvector('simple', content))",
)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for sql in _POSTGRES if postgres else _SQLITE:
        op.execute(sql)
