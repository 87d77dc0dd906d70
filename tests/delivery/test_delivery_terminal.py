"""A result for the terminal (`vikingbot chat`'s `cli` channel) lands in the owner's inbox.

Before, a `cli:` destination went to the gateway's terminal channel, which printed it
on the gateway process's stdout (nobody reads it) and reported `delivered`. Driven
through a real ChannelManager whose terminal channel writes to a captured stream,
and a fake Telegram for the channel that can take a message.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_telegram import FakeTelegram
from vikingbot.bus import MessageBus
from vikingbot.channels.cli import CliChannel
from vikingbot.channels.manager import ChannelManager
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import Message, SessionKey, SessionMeta

TERMINAL = SessionKey("cli", "default", "local")
PHONE = SessionKey("telegram", "default", "42")


@dataclass
class World:
    service: DeliveryService
    sessions: SessionStore
    telegram: FakeTelegram
    stdout: io.StringIO  # what the gateway's terminal channel printed
    clock: FakeClock
    store: Any


@pytest.fixture
def telegram() -> Iterator[tuple[FakeTelegram, str]]:
    fake = FakeTelegram()
    with fake.serve() as api:
        yield fake, api


@pytest.fixture
async def world(
    telegram: tuple[FakeTelegram, str], store: Any, tmp_path: Path
) -> AsyncIterator[World]:
    fake, api = telegram
    channels = {
        "sendRetries": 0,
        "cli": {"enabled": True},
        "telegram": {
            "enabled": True,
            "token": fake.token,
            "apiBase": api,
            "allowFrom": ["42"],
        },
    }
    config = Config.model_validate({"bot": {"owner": None, "channels": channels}})
    clock = FakeClock()
    sessions = SessionStore(tmp_path / "sessions", clock=clock)
    manager = ChannelManager(config, bus=MessageBus(), store=store, clock=clock)
    await manager.start()
    stdout = io.StringIO()
    terminal = manager.channel("cli")
    assert isinstance(terminal, CliChannel)
    terminal.stream = stdout
    service = DeliveryService(
        config, store=store, sessions=sessions, clock=clock, sink=manager.send
    )
    yield World(service, sessions, fake, stdout, clock, store)
    await manager.stop()


def active(w: World, key: SessionKey, minutes_ago: int) -> SessionMeta:
    w.sessions.get_or_create(key)
    w.sessions.append(key, Message("user", "hi", w.clock.now() - timedelta(minutes=minutes_ago)))
    meta = w.sessions.get_meta(key)
    assert meta is not None
    return meta


def texts(w: World) -> list[str]:
    return [i.text for i in w.service.inbox.items(limit=100)]


async def test_the_terminal_as_the_most_recent_chat_gets_the_result_in_the_inbox(
    world: World,
) -> None:
    """No owner: `owner` falls back to the most recently active chat, here the terminal."""
    sessions = [active(world, TERMINAL, 1)]
    report = await world.service.deliver(
        "Free disk: 40 GB.", "owner", sessions=sessions, dedupe_key="hb:1", source="heartbeat"
    )
    assert report.status == "inboxed" and report.failed == []
    assert texts(world) == ["Free disk: 40 GB."]
    assert world.stdout.getvalue() == ""  # nothing printed where nobody reads
    # the terminal session's history has it, as a chat delivery would
    last = world.sessions.read_messages(TERMINAL)[-1]
    assert (last.role, last.content) == ("assistant", "Free disk: 40 GB.")
    # delivered once: the same run again adds nothing
    again = await world.service.deliver(
        "Free disk: 40 GB.", "owner", sessions=sessions, dedupe_key="hb:1", source="heartbeat"
    )
    assert again.status == "inboxed"
    assert texts(world) == ["Free disk: 40 GB."]


@pytest.mark.parametrize("target", ["cli", "cli:local", "cli:elsewhere"])
async def test_a_cli_target_is_the_inbox_not_a_refusal(world: World, target: str) -> None:
    report = await world.service.deliver("Done.", target, dedupe_key="c:1", source="cron:x")
    assert (report.status, report.refused) == ("inboxed", None)
    assert texts(world) == ["Done."]
    assert world.stdout.getvalue() == "" and world.telegram.sent == []
    assert world.store.audit_events(action="delivery.refuse") == []


async def test_all_sends_to_the_phone_and_keeps_one_copy_for_the_terminals(
    world: World,
) -> None:
    sessions = [
        active(world, TERMINAL, 1),
        active(world, SessionKey("cli", "default", "work"), 2),
        active(world, PHONE, 3),
    ]
    report = await world.service.deliver(
        "Build is green.", "all", sessions=sessions, dedupe_key="hb:2", source="heartbeat"
    )
    assert report.status == "delivered"  # the phone's channel took it
    assert [m["text"] for m in world.telegram.sent] == ["Build is green."]
    assert texts(world) == ["Build is green."]  # one inbox item for both terminal chats
    assert world.stdout.getvalue() == ""


def test_terminal_chats_and_the_inbox_make_one_inbox_item_and_other_accounts_chats_stay() -> None:
    from vikingbot.delivery.service import _terminal_to_inbox
    from vikingbot.delivery.types import Destination

    inbox = Destination.inbox("default")
    term = Destination.chat("cli", "local")
    work = Destination.chat("telegram", "42", channel_id="work")
    home = Destination.chat("telegram", "42")  # same chat id, the default account
    for dests in ([inbox, term, work, home], [term, inbox, work, home], [term, term, work, home]):
        got = _terminal_to_inbox(dests)
        assert [d.kind for d in got].count("inbox") == 1, dests
        assert work in got and home in got  # two accounts' chats print alike; both get it
