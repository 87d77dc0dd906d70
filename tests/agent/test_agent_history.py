"""What every loop shares (agent.history): what a turn leaves in history and how it is bounded."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vikingbot.agent.context import EARLIER_NOTE
from vikingbot.agent.history import CUT_NOTE
from vikingbot.agent.loop import BuiltinLoop
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_anthropic import FakeAnthropic
from vikingbot.testing.fake_openai import FakeOpenAI, garbage, reply, trickle

KEY = SessionKey("telegram", "default", "42")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_delivered_heartbeat_result_is_seen_in_the_owners_next_turn(
    kind: str,
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    clock: FakeClock,
    workspace: Path,
) -> None:
    fake = fake_openai if kind == "openai" else fake_anthropic
    # the delivery service records a delivered result in the chat's history like this
    sessions.get_or_create(KEY)
    result = "Your passport expires in 30 days."
    sessions.append(
        KEY,
        Message(
            "assistant",
            result,
            clock.now(),
            metadata={"delivered_from": "heartbeat:shared", "bookkeeping": True},
        ),
    )
    fake.script([reply("Book it at the town hall.")])
    loop = make_loop(agent_config(fake.base_url, kind))
    out = await loop.run_turn("what should I do about that?", KEY, {"workspace": str(workspace)})
    assert out.text == "Book it at the town hall."
    sent = fake.requests[0].text
    assert result in sent and EARLIER_NOTE in sent
    assert fake.requests[0].last_user_text == "what should I do about that?"


async def test_a_huge_reply_is_cut_and_says_so(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.script([reply("x" * 20_000_000, tokens_out=5)])
    loop = make_loop(agent_config(fake_openai.base_url, max_reply_chars=5000))
    out = await loop.run_turn("write a lot", KEY, {"workspace": str(workspace)})
    assert out.text == "x" * 5000 + CUT_NOTE.format(n=20_000_000 - 5000)
    saved = sessions.read_messages(KEY)
    assert [m.role for m in saved] == ["user", "assistant"]
    assert saved[1].content == out.text  # the history holds the cut reply, not 20 MB


async def test_a_garbage_answer_is_a_clear_error_and_the_prompt_is_kept(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.script([garbage("{this is not json")])
    loop = make_loop(agent_config(fake_openai.base_url))
    out = await loop.run_turn("are you there?", KEY, {"workspace": str(workspace)})
    assert out.ended == "error"
    assert out.error and "openai" in out.error
    assert [m.content for m in sessions.read_messages(KEY)] == ["are you there?"]


async def test_an_answer_that_trickles_for_ever_ends_at_the_turn_timeout(
    fake_openai: FakeOpenAI,
    make_loop: Callable[..., BuiltinLoop],
    agent_config: Callable[..., Config],
    sessions: SessionStore,
    workspace: Path,
) -> None:
    fake_openai.script([trickle()])
    loop = make_loop(agent_config(fake_openai.base_url, turn_timeout_s=0.5))
    t0 = time.monotonic()
    out = await loop.run_turn("hello?", KEY, {"workspace": str(workspace)})
    assert time.monotonic() - t0 < 5
    assert (out.ended, out.error) == ("timeout", "the turn did not finish within 0.5s")
    assert [m.content for m in sessions.read_messages(KEY)] == ["hello?"]
