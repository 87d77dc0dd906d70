"""Compaction: a long chat keeps its thread, within budget, and a "too long" answer is survived."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.summariser import kind, markers, summariser
from vikingbot.agent import compact
from vikingbot.agent.loop import BuiltinLoop
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply

KEY = SessionKey("cli", "default", "long")
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def msg(role: str, text: str, **meta: object) -> Message:
    return Message(role, text, T0, metadata=dict(meta))


# ------------------------------------------------------------------ pure rules


def test_split_reads_the_newest_summary_and_what_it_kept() -> None:
    history = [
        msg("user", "a"),
        msg("assistant", "b"),
        compact.summary_entry("S1", kept=1, folded=1, when=T0, model="m"),
        msg("user", "c"),
        msg("assistant", "d"),
        compact.summary_entry("S2", kept=2, folded=2, when=T0, model="m"),
        msg("user", "e"),
    ]
    got = compact.split(history)
    assert got.summary == "S2"
    assert [m.content for m in got.recent] == ["c", "d", "e"]
    assert compact.split(history[:2]) == compact.Split(None, history[:2])
    for n in range(len(history) + 1):  # reading from the newest end gives the same answer
        assert compact.split_back(reversed(history[:n])) == compact.split(history[:n])


@pytest.mark.parametrize(
    ("sizes", "fixed", "budget", "keep", "cap", "want"),
    [
        ([10, 10, 10, 10], 0, 100, 50, 40, 0),  # fits: nothing folded
        ([30, 30, 30, 30], 0, 100, 70, 40, 2),  # over budget: keep the last turn that fits
        ([10] * 8, 0, 1000, 1000, 4, 6),  # too many messages: fold down to half the cap
        ([10, 10, 500, 10], 0, 100, 50, 40, 2),  # newest turn alone too big: fold all before
    ],
)
def test_plan_fold(
    sizes: list[int], fixed: int, budget: int, keep: int, cap: int, want: int
) -> None:
    recent = [msg("user" if i % 2 == 0 else "assistant", "x" * n) for i, n in enumerate(sizes)]
    assert (
        compact.plan_fold(recent, fixed=fixed, budget=budget, keep=keep, max_messages=cap) == want
    )


def test_old_tool_results_are_cut_and_the_newest_turn_is_not() -> None:
    big = "y" * 5000
    recent = [msg("tool", big), msg("user", "q"), msg("tool", big)]
    cut = compact.cut_tool_results(recent, compact.last_user(recent))
    assert len(cut[0].content) < 400 and "cut" in cut[0].content
    assert cut[2].content == big


# ------------------------------------------------------------------ the loop


@pytest.fixture
def small(agent_config: Callable[..., Config], fake_openai: FakeOpenAI) -> Config:
    """A 2,048-token window: the budget is 0.6 x 2,048 x 4 = 4,915 characters."""
    return agent_config(fake_openai.base_url, context_window=2048, history_window=120)


async def test_300_turns_never_fail_and_keep_early_markers(
    small: Config,
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.responder = summariser()
    loop = make_loop(small, tools={})
    budget = compact.budget_chars(2048, 0.6)
    for n in range(1, 301):
        note = f"MARK-{n} is the code for day {n}." if n in (5, 50, 150) else ""
        result = await loop.run_turn(
            f"turn {n}. {note} " + "chat " * 40, KEY, {"workspace": str(workspace)}
        )
        assert result.ended == "final", (n, result.error)
    chats = [r for r in fake_openai.requests if kind(r) == "chat"]
    summaries = [r for r in fake_openai.requests if kind(r) == "summary"]
    assert len(chats) == 300
    assert 3 <= len(summaries) <= 60
    assert max(sum(len(m.get("content") or "") for m in r.messages) for r in chats) <= budget
    last = chats[-1]
    assert markers(last.text) == ["MARK-5", "MARK-50", "MARK-150"]
    assert "Conversation so far" in last.system
    # every message is still on disk: summaries are entries beside them
    on_disk = sessions.read_messages(KEY)
    assert sum(1 for m in on_disk if m.role == "user") == 300
    assert sum(1 for m in on_disk if compact.is_summary(m)) == len(summaries)
    assert set(result.request_chars) == {"system", "memory", "summary", "recent", "tools"}
    assert result.request_chars["summary"] > 0


async def test_a_too_long_answer_compacts_and_the_turn_succeeds(
    agent_config: Callable[..., Config],
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    loop = make_loop(agent_config(fake_openai.base_url), tools={})
    meta = {"workspace": str(workspace)}
    fake_openai.script(["noted", "noted"])
    await loop.run_turn("MARK-1 my locker is 42", KEY, meta)
    await loop.run_turn("MARK-2 and my bike is blue", KEY, meta)
    fake_openai.reset()
    fake_openai.script(
        [
            error(
                400,
                "This model's maximum context length is 8192 tokens",
                code="context_length_exceeded",
            ),
        ]
    )
    fake_openai.responder = summariser(lambda r: reply("Locker 42, blue bike."))
    result = await loop.run_turn("what do you know?", KEY, meta)
    assert (result.ended, result.text) == ("final", "Locker 42, blue bike.")
    kinds = [kind(r) for r in fake_openai.requests]
    assert kinds == ["chat", "summary", "chat"]
    retry = fake_openai.requests[-1]
    assert markers(retry.system) == ["MARK-1", "MARK-2"]  # folded into the summary
    assert [m["role"] for m in retry.messages] == ["system", "user"]
    assert sum(1 for m in sessions.read_messages(KEY) if compact.is_summary(m)) == 1


async def test_a_full_context_heartbeat_session_is_compacted_the_same_way(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    config = Config.model_validate(
        {
            "bot": {
                "agents": {"provider": "openai", "model": "m", "contextWindow": 2048},
                "providers": {"openai": {"apiBase": fake_openai.base_url, "apiKey": "sk-test"}},
                "heartbeat": {"context": "full"},
            }
        }
    )
    key = SessionKey("heartbeat", "default", "shared")
    old = [
        msg(role, f"MARK-{i} " + "x" * 300 if role == "user" else "done", heartbeat=True)
        for i in range(20)
        for role in ("user", "assistant")
    ]
    sessions.append(key, *old)
    fake_openai.responder = summariser(lambda r: reply("HEARTBEAT_OK"))
    loop = make_loop(config, tools={})
    result = await loop.run_turn("check", key, {"workspace": str(workspace), "heartbeat": True})
    assert result.ended == "final"
    assert [kind(r) for r in fake_openai.requests] == ["summary", "chat"]
    assert "MARK-0" in fake_openai.requests[-1].system  # folded, not dropped
