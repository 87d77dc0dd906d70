"""Full-text search over session history, and the read-only ``search_history`` tool.

SQLite uses the FTS5 table ``history_fts`` (words match by prefix: ``deploy``
finds "deployment"; ``"two words"`` in quotes is a phrase). PostgreSQL uses
``websearch_to_tsquery('simple', ...)`` over the GIN index on ``history_docs``
(whole words; quotes make a phrase, ``-word`` excludes). Results are best match
first, newest first among equals.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from vikingbot.errors import ToolError
from vikingbot.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from vikingbot.store.db import StateStore

MARK = "**"
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class SearchHit:
    session_key: str
    at: datetime
    role: str
    snippet: str
    line_no: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_key": self.session_key,
            "at": self.at,
            "role": self.role,
            "snippet": self.snippet,
            "line_no": self.line_no,
        }


def fts5_query(text: str) -> str:
    """A user's query as a safe FTS5 query: quoted phrases stay phrases, words match by prefix.

    Every word is quoted, so FTS5 operators and punctuation in the input are
    never syntax; terms are ANDed. Returns ``""`` when there is nothing to search.
    """
    terms: list[str] = []
    for m in _TERM.finditer(text or ""):
        phrase, word = m.group(1), m.group(2)
        if phrase is not None:
            words = _WORD.findall(phrase)
            if words:
                terms.append('"' + " ".join(words) + '"')
        else:
            terms.extend(f'"{w}"*' for w in _WORD.findall(word))
    return " ".join(terms)


def search(store: StateStore, query: str, limit: int = 20) -> list[SearchHit]:
    """Messages matching ``query``, best first (at most ``limit``)."""
    limit = max(1, min(int(limit), 200))
    if not query or not query.strip():
        return []
    if store.engine.dialect.name == "postgresql":
        return _search_pg(store, query, limit)
    return _search_sqlite(store, query, limit)


def _search_sqlite(store: StateStore, query: str, limit: int) -> list[SearchHit]:
    import sqlalchemy as sa

    from vikingbot.store.tables import history_docs as d

    match = fts5_query(query)
    if not match:
        return []
    fts = sa.table("history_fts", sa.column("rowid"))
    snippet: Any = sa.literal_column(f"snippet(history_fts, 0, '{MARK}', '{MARK}', '…', 16)")
    stmt = (
        sa.select(d.c.session_key, d.c.at, d.c.role, snippet.label("snippet"), d.c.line_no)
        .select_from(fts.join(d, d.c.id == fts.c.rowid))
        .where(sa.text("history_fts MATCH :match").bindparams(match=match))
        .order_by(sa.literal_column("bm25(history_fts)"), d.c.at.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).fetchall()
    return [SearchHit(r[0], r[1], r[2], _tidy(r[3]), r[4]) for r in rows]


def _search_pg(store: StateStore, query: str, limit: int) -> list[SearchHit]:
    import sqlalchemy as sa

    from vikingbot.store.tables import history_docs as d

    tsq = sa.func.websearch_to_tsquery(sa.literal_column("'simple'"), query)
    vector = sa.func.to_tsvector(sa.literal_column("'simple'"), d.c.content)
    headline = sa.func.ts_headline(
        sa.literal_column("'simple'"),
        d.c.content,
        tsq,
        f"StartSel={MARK}, StopSel={MARK}, MaxWords=24, MinWords=8, MaxFragments=1",
    )
    stmt = (
        sa.select(d.c.session_key, d.c.at, d.c.role, headline.label("snippet"), d.c.line_no)
        .where(vector.op("@@")(tsq))
        .order_by(sa.func.ts_rank(vector, tsq).desc(), d.c.at.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).fetchall()
    return [SearchHit(r[0], r[1], r[2], _tidy(r[3]), r[4]) for r in rows]


def _tidy(snippet: str | None) -> str:
    return " ".join((snippet or "").split())


def format_hits(hits: list[SearchHit]) -> str:
    """Hits as lines of text (for the model and the terminal)."""
    if not hits:
        return "No matches in session history."
    return "\n".join(
        f"{h.at:%Y-%m-%d %H:%M} UTC  {h.session_key}  {h.role}: {h.snippet}" for h in hits
    )


class SearchHistoryTool(Tool):
    """Search what was said in earlier conversations (read-only)."""

    name: ClassVar[str] = "search_history"
    description: ClassVar[str] = (
        "Full-text search over past conversations (all sessions, up to the current "
        "turn). Returns matching "
        "messages with session, time (UTC), role and a snippet. Words match by prefix; "
        'put a phrase in double quotes, e.g. "quarterly report".'
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words or a quoted phrase to find."},
            "limit": {
                "type": "integer",
                "description": "At most this many results (default 10, max 50).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    read_only: ClassVar[bool] = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        args = self.check_args(args)
        query = str(args["query"]).strip()
        if not query:
            raise ToolError("search_history: query is empty")
        limit = min(max(int(args.get("limit") or 10), 1), 50)
        if ctx.store is None:
            raise ToolError("search_history: no state database in this context")
        sessions_dir = getattr(ctx.sessions, "sessions_dir", None)
        hits = await asyncio.to_thread(fresh_search, ctx.store, sessions_dir, query, limit)
        return format_hits(hits)


def fresh_search(store: StateStore, sessions_dir: Any, query: str, limit: int) -> list[SearchHit]:
    """Index what is new (cheap: unchanged files are not read), then search."""
    if sessions_dir is not None:
        from vikingbot.housekeeping.index import index_sessions

        index_sessions(store, sessions_dir)
    return search(store, query, limit)
