"""Model fallbacks: a primary on loopback that answers 503, then hangs, then recovers.

The real ``openai`` SDK talks to two fake servers: ``primary`` (the configured
model) and ``backup`` (``bot.agents.fallback_models``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import LoopFactory
from tests.support.harness import make_config
from vikingbot.config.schema import Config
from vikingbot.providers.fallback import Link, OutageEvent, chain, order
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply


@pytest.fixture
def backup() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


def _config(primary: str, backup: str, *, probe_s: float = 0, **agents: Any) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "agents": {
                    "provider": "primary",
                    "model": "big",
                    "fallbackModels": [{"provider": "backup", "model": "small"}],
                    "fallbackProbeS": probe_s,
                    **agents,
                },
                "providers": {
                    "primary": {
                        "kind": "openai",
                        "apiBase": primary,
                        "apiKey": "sk-1",
                        "maxRetries": 1,
                        "timeoutS": 1.0,
                    },
                    "backup": {"kind": "openai", "apiBase": backup, "apiKey": "sk-2"},
                },
            }
        }
    )


async def test_outage_then_hang_then_recovery(
    fake_openai: FakeOpenAI, backup: FakeOpenAI, make_loop: LoopFactory, workspace: Path
) -> None:
    primary = fake_openai
    loop = make_loop(_config(primary.base_url, backup.base_url))
    events: list[OutageEvent] = []
    loop.on_outage = lambda e: events.append(e) if e.kind != "answering" else None
    meta = {"workspace": str(workspace)}

    # 1. the primary answers 503 (and 503 again on the SDK's retry): the backup answers
    primary.script([error(503), error(503)])
    backup.script([reply("from the backup")])
    first = await loop.run_turn("hello", "telegram:bot:1", meta)
    assert (first.text, first.model, first.ended) == ("from the backup", "backup/small", "final")
    assert len(primary.requests) == 2 and backup.requests[0].model == "small"
    assert [(e.kind, e.down.label, e.answered_by.label) for e in events] == [
        ("fallback", "primary/big", "backup/small")
    ]
    assert "503" in (events[0].error or "")

    # 2. the primary hangs (past its timeout_s): the backup answers; the owner is not told again
    primary.script([reply("too late", delay_s=30)])
    backup.script([reply("backup again")])
    second = await loop.run_turn("still there?", "telegram:bot:1", meta)
    assert (second.text, second.model) == ("backup again", "backup/small")
    assert len(events) == 1

    # 3. the primary answers again: it is used, and the owner hears it is back
    primary.script([reply("primary is back")])
    third = await loop.run_turn("and now?", "telegram:bot:1", meta)
    assert (third.text, third.model) == ("primary is back", "primary/big")
    assert [e.kind for e in events] == ["fallback", "back"]
    assert len(backup.requests) == 2


async def test_a_refusal_is_not_an_outage(
    fake_openai: FakeOpenAI, backup: FakeOpenAI, make_loop: LoopFactory, workspace: Path
) -> None:
    loop = make_loop(_config(fake_openai.base_url, backup.base_url))
    fake_openai.script([error(400, "your request was refused")])
    out = await loop.run_turn("hi", "telegram:bot:1", {"workspace": str(workspace)})
    assert out.ended == "error" and "refused" in (out.error or "")
    assert out.provider_down is False
    assert backup.requests == []


async def test_a_resting_primary_is_passed_over_and_all_down_is_an_outage(
    fake_openai: FakeOpenAI, backup: FakeOpenAI, make_loop: LoopFactory, workspace: Path
) -> None:
    loop = make_loop(_config(fake_openai.base_url, backup.base_url, probe_s=600))
    meta = {"workspace": str(workspace)}
    fake_openai.script([error(503), error(503)])
    backup.script([reply("one"), reply("two"), error(503), error(503), error(503), error(503)])
    assert (await loop.run_turn("a", "cli:default:x", meta)).text == "one"
    assert (await loop.run_turn("b", "cli:default:x", meta)).text == "two"
    assert len(fake_openai.requests) == 2  # resting: the second turn went straight to the backup
    fake_openai.script([error(503), error(503)])
    down = await loop.run_turn("c", "cli:default:x", meta)
    assert down.ended == "error" and down.provider_down is True
    assert sorted(row["model"] for row in loop.outages.status()) == ["backup/small", "primary/big"]


async def test_the_heartbeats_own_model_falls_back_too(
    fake_openai: FakeOpenAI, backup: FakeOpenAI, make_loop: LoopFactory, workspace: Path
) -> None:
    config = _config(backup.base_url, backup.base_url)
    config.bot.providers["hb"] = config.bot.providers["primary"].model_copy(
        update={"api_base": fake_openai.base_url}
    )
    loop = make_loop(config)
    fake_openai.script([error(502), error(502)])
    backup.script([reply("checked")])
    meta = {"workspace": str(workspace), "heartbeat": True, "provider": "hb", "model": "hb-1"}
    out = await loop.run_turn("check the list", "heartbeat:hb:w", meta)
    assert (out.text, out.model) == ("checked", "backup/small")
    assert fake_openai.requests[0].model == "hb-1"


def test_order_rests_failed_links_and_never_drops_one() -> None:
    a, b, c = Link("a", "1"), Link("b", "2"), Link("c", "3")
    links = chain(a, [b, a, c, b])
    assert links == [a, b, c]
    assert order(links, {}, 10.0) == [a, b, c]
    assert order(links, {a: 20.0}, 10.0) == [b, c, a]
    assert order(links, {a: 5.0}, 10.0) == [a, b, c]
    assert order(links, {a: 20.0, b: 20.0, c: 20.0}, 10.0) == [a, b, c]


async def _notices_sent() -> None:
    """Wait for the outage notices in flight (tasks named ``notice:model-outage:...``)."""
    pending = [t for t in asyncio.all_tasks() if t.get_name().startswith("notice:model-outage")]
    await asyncio.wait_for(asyncio.gather(*pending), 30)


async def test_the_owner_is_told_once_per_outage_even_across_a_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, backup: FakeOpenAI
) -> None:
    from tests.support.harness import build_harness
    from vikingbot.gateway import compose

    config = _config(fake_openai.base_url, backup.base_url)
    config.bot.owner = "telegram:42"
    config.bot.channels = make_config("http://x").bot.channels
    async for h in build_harness(tmp_path, fake_openai, config):
        h.rt.tell_outages(compose.outage_notices(h.rt))
        meta = {"workspace": str(tmp_path / "ws")}
        fake_openai.script([error(503), error(503)])
        backup.script([reply("backup answers")])
        await h.rt.agent().run_turn("hi", "telegram:default:42", meta)
        await _notices_sent()
        assert [m.chat_id for m in h.sent] == ["42"]
        assert "primary/big cannot answer" in h.sent[0].text
        assert "backup/small" in h.sent[0].text

        # the gateway restarts during the outage: a new loop, the same notices table
        await h.rt.aclose()
        fake_openai.script([error(503), error(503)])
        backup.script([reply("still the backup")])
        again = await h.rt.agent().run_turn("hi again", "telegram:default:42", meta)
        assert again.model == "backup/small"
        await _notices_sent()
        assert len(h.sent) == 1  # told once per outage

        fake_openai.script([reply("primary is back")])
        await h.rt.agent().run_turn("and now?", "telegram:default:42", meta)
        await _notices_sent()
        assert len(h.sent) == 2 and "answers again" in h.sent[1].text

        # a restart after an outage told and before the model answered: its first answer
        # in the new process ends the told outage (the next one is news again)
        h.clock.advance(hours=1)
        fake_openai.script([error(503), error(503)])
        backup.script([reply("backup")])
        await h.rt.agent().run_turn("x", "telegram:default:42", meta)
        await _notices_sent()
        assert len(h.sent) == 3
        await h.rt.aclose()
        h.clock.advance(hours=1)
        fake_openai.script([reply("primary")])
        await h.rt.agent().run_turn("y", "telegram:default:42", meta)
        await _notices_sent()
        assert len(h.sent) == 4 and "answers again" in h.sent[3].text
