"""Delivering results end to end: through the outbox to fake Slack/Telegram, history, audit, inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_slack import FakeSlack
from tests.support.fake_telegram import FakeTelegram
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.delivery.inbox import Inbox
from vikingbot.delivery.service import DeliveryService
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey, SessionMeta

OWNER_DM = "D0OWNER"


@dataclass
class World:
    slack: FakeSlack
    telegram: FakeTelegram
    service: DeliveryService
    sessions: SessionStore
    store: Any
    manager: ChannelManager


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSlack, str, FakeTelegram, str]]:
    slack, telegram = FakeSlack(), FakeTelegram()
    with slack.serve() as slack_api, telegram.serve() as telegram_api:
        yield slack, slack_api, telegram, telegram_api


def make_config(fakes: tuple[FakeSlack, str, FakeTelegram, str], **bot: Any) -> Config:
    slack, slack_api, telegram, telegram_api = fakes
    channels = {
        "cli": {"enabled": False},
        "sendRetries": 0,
        "slack": {
            "enabled": True,
            "botToken": slack.bot_token,
            "apiBase": slack_api,
            "ownerChat": OWNER_DM,
            "allowFrom": ["C0TEAM"],
        },
        "telegram": {"enabled": True, "token": telegram.token, "apiBase": telegram_api},
    }
    return Config.model_validate(
        {"bot": {"owner": f"slack:{OWNER_DM}", "channels": channels, **bot}}
    )


@pytest.fixture
async def world(
    fakes: tuple[FakeSlack, str, FakeTelegram, str], store: Any, tmp_path: Path
) -> AsyncIterator[World]:
    config = make_config(fakes)
    clock = FakeClock()
    bus = MessageBus()
    sessions = SessionStore(tmp_path / "sessions", clock=clock)
    manager = ChannelManager(config, bus=bus, store=store, clock=clock, retry_delay_s=0.01)
    await manager.start()
    service = DeliveryService(
        config, store=store, sessions=sessions, clock=clock, sink=manager.send
    )
    yield World(fakes[0], fakes[2], service, sessions, store, manager)
    await manager.stop()


async def test_a_heartbeat_result_reaches_the_owners_dm_and_its_history(world: World) -> None:
    report = await world.service.deliver(
        "Disk on web-1 is 91% full.", None, dedupe_key="hb:run-1", source="heartbeat"
    )
    assert report.delivered == [f"slack:{OWNER_DM}"]
    assert [(p["channel"], p["text"]) for p in world.slack.posts] == [
        (OWNER_DM, "Disk on web-1 is 91% full.")
    ]
    key = SessionKey("slack", "default", OWNER_DM)
    [message] = world.sessions.read_messages(key)
    assert (message.role, message.content) == ("assistant", "Disk on web-1 is 91% full.")
    assert message.metadata == {"delivered_from": "heartbeat", "bookkeeping": True}
    # bookkeeping never makes a session fresh
    meta = world.sessions.get_meta(key)
    assert meta is not None and meta.last_user_at is None


async def test_the_same_run_is_delivered_once(world: World) -> None:
    for _ in range(3):
        report = await world.service.deliver(
            "Once.", "owner", dedupe_key="hb:run-2", source="heartbeat"
        )
        assert report.ok
    assert [p["text"] for p in world.slack.posts] == ["Once."]


async def test_a_tag_for_a_chat_off_the_allow_list_is_refused_audited_and_sent_to_the_owner(
    world: World,
) -> None:
    report = await world.service.deliver(
        "Quarterly numbers attached.", "slack:C0EVIL", dedupe_key="hb:run-3", source="heartbeat"
    )
    assert report.refused is not None and "allow_from" in report.refused
    assert [p["channel"] for p in world.slack.posts] == [OWNER_DM]
    [event] = world.store.audit_events(action="delivery.refuse")
    assert (event["actor"], event["subject"], event["outcome"]) == (
        "heartbeat",
        "slack:C0EVIL",
        "refused",
    )
    assert "allow_from" in event["reason"]
    assert event["details"] == {"fallback": [f"slack:{OWNER_DM}"]}


async def test_malformed_tags_and_empty_ids_fall_back_to_the_owner(world: World) -> None:
    malformed = ["slack:C0TEAM\nowner", "slack:C0TE AM", "matrix:!room", "x" * 400]
    for n, tag in enumerate(malformed):
        report = await world.service.deliver("Result.", tag, dedupe_key=f"m{n}", source="heartbeat")
        assert report.delivered == [f"slack:{OWNER_DM}"], tag
        assert report.refused is not None and "malformed" in report.refused
    assert len(world.store.audit_events(action="delivery.refuse")) == len(malformed)
    for n, tag in enumerate(["slack:", "slack"]):
        report = await world.service.deliver("Result.", tag, dedupe_key=f"e{n}", source="heartbeat")
        assert report.delivered == [f"slack:{OWNER_DM}"]
        assert report.refused is None  # an empty id is the owner, not a refusal
    assert [p["channel"] for p in world.slack.posts] == [OWNER_DM] * 6
    assert len(world.store.audit_events(action="delivery.refuse")) == len(malformed)


async def test_an_allowed_thread_target_is_answered_in_the_thread(world: World) -> None:
    await world.service.deliver(
        "In thread.", "slack:C0TEAM:1700.42", dedupe_key="t", source="cron:x"
    )
    assert [(p["channel"], p["thread_ts"]) for p in world.slack.posts] == [("C0TEAM", "1700.42")]


TOKEN_CASES = [
    ("HEARTBEAT_OK", None),
    ("**HEARTBEAT_OK**", None),
    ("  heartbeat_ok. ", None),
    ("HEARTBEAT_KEEP", None),
    ("Still working on it. HEARTBEAT_KEEP", "Still working on it."),
    ("HEARTBEAT_OK\n\nActually, the build broke.", "Actually, the build broke."),
    ("Done: `HEARTBEAT_OK` tokens removed.", "Done: tokens removed."),
]


async def test_tokens_never_reach_a_user(world: World) -> None:
    for n, (reply, delivered) in enumerate(TOKEN_CASES):
        before = len(world.slack.posts)
        report = await world.service.deliver(
            reply, "owner", dedupe_key=f"tok{n}", source="heartbeat"
        )
        texts = [p["text"] for p in world.slack.posts[before:]]
        assert texts == ([] if delivered is None else [delivered]), reply
        assert report.skipped == ("empty" if delivered is None else None)
    assert all("HEARTBEAT" not in p["text"].upper() for p in world.slack.posts)
    history = world.sessions.read_messages(SessionKey("slack", "default", OWNER_DM))
    assert [m.content for m in history] == [d for _, d in TOKEN_CASES if d is not None]


async def test_dashboard_and_prompt_targets_land_in_the_inbox(world: World) -> None:
    await world.service.deliver("For later.", "dashboard", dedupe_key="d1", source="cron:news")
    await world.service.deliver(
        "Summarise this.", "prompt:dashboard:ops", dedupe_key="d2", source="heartbeat"
    )
    items = Inbox(world.store).items()
    assert [(i.slot, i.kind, i.text, i.source) for i in items] == [
        ("default", "message", "For later.", "cron:news"),
        ("ops", "prompt", "Summarise this.", "heartbeat"),
    ]
    assert world.slack.posts == []
    # the same run again (e.g. retried after a restart) adds nothing
    await world.service.deliver("For later.", "dashboard", dedupe_key="d1", source="cron:news")
    assert len(Inbox(world.store).items()) == 2


async def test_silent_targets_send_nothing(world: World) -> None:
    report = await world.service.deliver("Quiet.", "none", dedupe_key="s", source="heartbeat")
    assert report.skipped == "silent"
    assert world.slack.posts == [] and Inbox(world.store).items() == []


async def test_an_undeliverable_result_is_kept_in_the_inbox(world: World) -> None:
    world.slack.fail_next_post("channel_not_found")
    report = await world.service.deliver(
        "Important.", "slack:C0TEAM", dedupe_key="u", source="heartbeat"
    )
    assert report.failed == ["slack:C0TEAM"]
    [item] = Inbox(world.store).items()
    assert item.text == "Important."
    assert "not delivered to slack:C0TEAM" in (item.source or "")


async def test_all_fans_out_to_each_chat_once(world: World) -> None:
    clock = FakeClock()
    sessions = [
        SessionMeta(
            SessionKey("slack", "default", "C0TEAM"), clock.now(), clock.now(), clock.now()
        ),
        SessionMeta(
            SessionKey("telegram", "default", "4242"), clock.now(), clock.now(), clock.now()
        ),
    ]
    for _ in range(2):
        report = await world.service.deliver(
            "News.", "all", sessions=sessions, dedupe_key="a", source="heartbeat"
        )
        assert sorted(report.delivered) == ["slack:C0TEAM", "telegram:4242"]
    assert [p["channel"] for p in world.slack.posts] == ["C0TEAM"]
    sent = await world.telegram.wait_sent(1)
    assert [s["chat_id"] for s in sent] == ["4242"]
    assert len(world.sessions.read_messages(SessionKey("telegram", "default", "4242"))) == 1


async def test_a_result_reaches_the_owner_on_telegram(
    fakes: tuple[FakeSlack, str, FakeTelegram, str], store: Any, tmp_path: Path
) -> None:
    config = make_config(fakes, owner="telegram:4242")
    bus = MessageBus()
    manager = ChannelManager(config, bus=bus, store=store)
    await manager.start()
    try:
        service = DeliveryService(
            config, store=store, sessions=SessionStore(tmp_path / "s"), sink=manager.send
        )
        report = await service.deliver(
            "Backup finished.", None, dedupe_key="tg-1", source="cron:backup"
        )
    finally:
        await manager.stop()
    assert report.delivered == ["telegram:4242"]
    assert [(s["chat_id"], s["text"]) for s in fakes[2].sent] == [("4242", "Backup finished.")]
