"""The history index and search: a phrase said in a chat is found again, on both backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vikingbot.config.schema import Config
from vikingbot.housekeeping.index import index_sessions
from vikingbot.housekeeping.search import SearchHistoryTool, fts5_query, search
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import ToolContext

if TYPE_CHECKING:
    from conftest import Housekeeping

TG = "telegram:default:42"
SL = "slack:T1:C9"


def test_a_phrase_from_history_is_found(hk_db: Housekeeping) -> None:
    hk = hk_db
    hk.sessions.append(
        TG, hk.msg("user", "Remind me to renew the passport before the Lisbon trip", 2)
    )
    hk.sessions.append(TG, hk.msg("assistant", "Noted: passport renewal before Lisbon.", 2))
    hk.sessions.append(SL, hk.msg("user", "What is the build status?", 1))
    hk.sessions.append(SL, hk.msg("tool", "passport Lisbon (tool output is not indexed)", 1))
    stats = index_sessions(hk.store, hk.sessions.sessions_dir)
    assert stats.docs_added == 3 and stats.errors == []

    hits = search(hk.store, "lisbon trip")
    assert [(h.session_key, h.role) for h in hits] == [(TG, "user")]
    assert "**Lisbon**" in hits[0].snippet and "**trip**" in hits[0].snippet
    assert hits[0].at == hk.msg("user", "", 2).timestamp

    both = search(hk.store, "passport")
    assert sorted(h.role for h in both) == ["assistant", "user"]
    assert search(hk.store, "kangaroo") == []


def test_indexing_is_incremental_and_follows_resets(hk_db: Housekeeping) -> None:
    hk = hk_db
    hk.sessions.append(TG, hk.msg("user", "first topic: gardening tomatoes", 3))
    assert index_sessions(hk.store, hk.sessions.sessions_dir).docs_added == 1
    assert index_sessions(hk.store, hk.sessions.sessions_dir).docs_added == 0  # nothing new

    hk.sessions.append(TG, hk.msg("user", "second topic: sourdough starter", 1))
    assert index_sessions(hk.store, hk.sessions.sessions_dir).docs_added == 1

    hk.sessions.reset(TG)  # history dropped, then the chat goes on
    hk.sessions.append(TG, hk.msg("user", "third topic: bicycle repair", 0))
    hk.sessions.append(TG, hk.msg("assistant", "Check the chain tension.", 0))
    stats = index_sessions(hk.store, hk.sessions.sessions_dir)
    assert stats.sessions_reindexed == 1
    assert search(hk.store, "tomatoes") == []
    assert search(hk.store, "sourdough") == []
    assert [h.snippet for h in search(hk.store, "bicycle")] == ["third topic: **bicycle** repair"]


def test_queries_with_search_syntax_are_taken_literally(hk_db: Housekeeping) -> None:
    hk = hk_db
    hk.sessions.append(TG, hk.msg("user", "The C++ build (release) failed: error NEAR line 42", 0))
    index_sessions(hk.store, hk.sessions.sessions_dir)
    for query in ['"unbalanced', "NEAR(", "AND OR NOT", "release) *", "-", "line:42"]:
        search(hk.store, query)  # never a syntax error
    assert len(search(hk.store, '"error NEAR line"')) == 1
    assert search(hk.store, "   ") == []


def test_fts5_query_quotes_every_term() -> None:
    assert fts5_query('deploy "blue whale" a-b') == '"deploy"* "blue whale" "a"* "b"*'
    assert fts5_query('AND "') == '"AND"*'


async def test_search_history_tool(hk: Housekeeping) -> None:
    hk.sessions.append(SL, hk.msg("user", "The dentist appointment is on Thursday", 1))
    await hk.service.index_now()
    tool = SearchHistoryTool()
    assert tool.read_only and tool.name == "search_history"
    ctx = ToolContext(
        workspace=hk.workspaces.root,
        session_key=SessionKey.parse(TG),
        config=Config(),
        store=hk.store,
        sessions=hk.sessions,
    )
    out = await tool.run({"query": "dentist"}, ctx)
    assert SL in out and "**dentist**" in out and "2026-02-28" in out
    assert await tool.run({"query": "volcano"}, ctx) == "No matches in session history."
    hk.sessions.append(TG, hk.msg("user", "a volcano erupted on the news", 0))
    out = await tool.run({"query": "volcano"}, ctx)  # said a moment ago: found too
    assert TG in out and "**volcano**" in out


async def test_two_indexers_at_once_index_each_line_once(hk_db: Housekeeping) -> None:
    import asyncio

    hk = hk_db
    for n in range(20):
        hk.sessions.append(f"telegram:default:{n}", hk.msg("user", f"note number {n} zebra", 1))
    a, b = await asyncio.gather(
        asyncio.to_thread(index_sessions, hk.store, hk.sessions.sessions_dir),
        asyncio.to_thread(index_sessions, hk.store, hk.sessions.sessions_dir),
    )
    assert a.errors == [] and b.errors == []
    assert a.docs_added + b.docs_added == 20
    assert len(search(hk.store, "zebra", limit=100)) == 20
