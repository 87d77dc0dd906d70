"""Feishu / Lark through lark-oapi against a loopback fake of the Open Platform.

The SDK is pointed at the fake by the channel's ``domain``; the fake posts events to
the channel's callback route, served on loopback as the gateway serves it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from tests.support.fake_feishu import FakeFeishu
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.doctor import _channels
from vikingbot.store import StateStore
from vikingbot.testing.server import serving

ALICE, BOB = "ou_alice", "ou_bob"
DM, GROUP = "oc_dm_alice", "oc_group"


@pytest.fixture
def fake() -> Iterator[tuple[FakeFeishu, str]]:
    feishu = FakeFeishu()
    with feishu.serve() as domain:
        yield feishu, domain


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


def config(feishu: FakeFeishu, domain: str, secret: str | None = None, **extra: Any) -> Config:
    section = {
        "enabled": True,
        "appId": feishu.app_id,
        "appSecret": secret or feishu.app_secret,
        "verificationToken": feishu.verification_token,
        "domain": domain,
        **extra,
    }
    channels = {"cli": {"enabled": False}, "sendRetries": 2, "feishu": section}
    return Config.model_validate({"bot": {"channels": channels}})


def row(manager: ChannelManager) -> dict[str, Any]:
    return next(r for r in manager.status() if r["name"] == "feishu")


@asynccontextmanager
async def running(cfg: Config, store: StateStore, **kw: Any) -> AsyncIterator[ChannelManager]:
    manager = ChannelManager(cfg, bus=kw.pop("bus", MessageBus()), store=store, **kw)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


async def test_a_p2p_message_and_a_mention_are_answered_and_a_stranger_is_ignored(
    fake: tuple[FakeFeishu, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    feishu, domain = fake
    cfg = config(feishu, domain, allowFrom=[ALICE])
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        assert row(manager)["running"]
        async with serving(Starlette(routes=manager.routes())) as gateway:
            url = f"{gateway}/feishu/events"
            check = await feishu.push(url, {"type": "url_verification", "challenge": "c-1",
                                            "token": feishu.verification_token})  # fmt: skip
            assert check.json() == {"challenge": "c-1"}
            forged = feishu.event(chat_id=DM, open_id=ALICE, text="forged")
            forged["header"]["token"] = "wrong"
            await feishu.push(url, forged)

            hello = feishu.event(chat_id=DM, open_id=ALICE, text="**hi** there")
            assert (await feishu.push(url, hello)).status_code == 200
            (answer,) = await feishu.wait_sent(1)
            assert answer["chat_id"] == DM and answer["msg_type"] == "post"
            assert '"tag": "md", "text": "echo: **hi** there"' in answer["body"]["content"]
            await feishu.push(url, hello)  # delivered again (no ack in time): one turn

            await feishu.push(url, feishu.event(chat_id=GROUP, open_id=ALICE, text="all",
                                                chat_type="group"))  # fmt: skip
            await feishu.push(url, feishu.event(chat_id=GROUP, open_id=BOB, text="secrets",
                                                chat_type="group", mention_bot=True))  # fmt: skip
            await feishu.push(url, feishu.event(chat_id=GROUP, open_id=ALICE, text="ping",
                                                chat_type="group", mention_bot=True))  # fmt: skip
            sent = await feishu.wait_sent(2)
            assert sent[1]["chat_id"] == GROUP and '"echo: ping"' in sent[1]["body"]["content"]
        (refusal,) = store.audit_events(action="inbound.refuse")
        assert refusal["subject"] == BOB
    assert [m.text for m in echo.seen] == ["**hi** there", "ping"]


async def test_a_resend_with_the_same_uuid_is_one_message_and_limits_are_clear(
    fake: tuple[FakeFeishu, str], store: StateStore
) -> None:
    feishu, domain = fake
    feishu.chats.add(DM)
    async with running(config(feishu, domain), store, retry_delay_s=0.05) as manager:
        feishu.rate_limit_next()
        msg = OutboundMessage("feishu", DM, "the build is green", dedupe_key="hb:1")
        assert await send_reply(manager, msg)  # the 429 is retried by the outbox
        channel = manager.channel("feishu")
        assert channel is not None
        await channel.send(msg)  # a gateway that died before recording it sends it again
        assert feishu.posts == 3 and len(feishu.sent) == 1

        text = "\n\n".join(f"part {i} " + "x" * 7000 for i in range(3))
        assert await send_reply(manager, OutboundMessage("feishu", DM, text, dedupe_key="long"))
        assert len(feishu.sent) == 4

        nowhere = OutboundMessage("feishu", "oc_nowhere", "hello?", dedupe_key="nowhere")
        assert not await send_reply(manager, nowhere)
        kept = Outbox(store).get("nowhere")
        assert kept is not None and kept.status == "failed" and "230002" in (kept.last_error or "")
        bad = OutboundMessage("feishu", "general", "hi", dedupe_key="bad-id")
        assert not await send_reply(manager, bad)
        kept = Outbox(store).get("bad-id")
        assert kept is not None and "chat id like oc_" in (kept.last_error or "")


async def test_a_bad_secret_is_a_clear_error_at_start_and_in_doctor(
    fake: tuple[FakeFeishu, str], store: StateStore
) -> None:
    feishu, domain = fake
    cfg = config(feishu, domain, secret="not-the-secret")
    async with running(cfg, store) as manager:
        status = row(manager)
        assert not status["running"]
        assert f"sign-in as {feishu.app_id}" in status["last_error"]
    (check,) = await asyncio.to_thread(_channels, cfg, True)
    assert check.status == "fail" and "sign-in" in check.message
    (good,) = await asyncio.to_thread(_channels, config(feishu, domain), True)
    assert good.status == "ok" and "vikingbot" in good.message


async def test_an_event_answered_before_a_restart_is_not_answered_again(
    fake: tuple[FakeFeishu, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    feishu, domain = fake
    cfg = config(feishu, domain, allowFrom=[ALICE])
    hello = feishu.event(chat_id=DM, open_id=ALICE, text="hello")
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        async with serving(Starlette(routes=manager.routes())) as gateway:
            await feishu.push(f"{gateway}/feishu/events", hello)
            await feishu.wait_sent(1)
    # a new gateway process on the same database: it never saw the event itself
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        async with serving(Starlette(routes=manager.routes())) as gateway:
            url = f"{gateway}/feishu/events"
            assert (await feishu.push(url, hello)).status_code == 200  # Feishu's redelivery
            await feishu.push(url, feishu.event(chat_id=DM, open_id=ALICE, text="again"))
            await feishu.wait_sent(2)
    # the agent takes messages in order: a second "hello" would have come before "again"
    assert [m.text for m in echo.seen] == ["hello", "again"]
    assert len(feishu.sent) == 2


async def test_an_event_is_answered_when_the_database_cannot_say_whether_it_was(
    fake: tuple[FakeFeishu, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    feishu, domain = fake
    with store.engine.begin() as conn:  # every claim now fails, as on a database that is down
        conn.exec_driver_sql("DROP TABLE leases")
    cfg = config(feishu, domain, allowFrom=[ALICE])
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        async with serving(Starlette(routes=manager.routes())) as gateway:
            url = f"{gateway}/feishu/events"
            hello = feishu.event(chat_id=DM, open_id=ALICE, text="hello")
            await feishu.push(url, hello)
            await feishu.push(url, hello)  # a repeat to the same process: still dropped
            await feishu.push(url, feishu.event(chat_id=DM, open_id=ALICE, text="again"))
            await feishu.wait_sent(2)
    assert [m.text for m in echo.seen] == ["hello", "again"]


async def test_an_image_and_a_voice_message_come_with_their_files(
    fake: tuple[FakeFeishu, str], store: StateStore, bus: MessageBus
) -> None:
    from tests.media.conftest import photo

    feishu, domain = fake
    pic = photo(320, 240)
    cfg = config(feishu, domain, allowFrom=[ALICE])
    async with (
        running(cfg, store, bus=bus, retry_delay_s=0.05) as manager,
        serving(Starlette(routes=manager.routes())) as gateway,
    ):
        url = f"{gateway}/feishu/events"
        await feishu.push(url, feishu.file_event(chat_id=DM, open_id=BOB, message_type="image",
                                                 key="img_bob", data=pic))  # fmt: skip
        await feishu.push(url, feishu.file_event(chat_id=DM, open_id=ALICE, message_type="image",
                                                 key="img_v2_1", data=pic))  # fmt: skip
        await feishu.push(url, feishu.file_event(chat_id=DM, open_id=ALICE, message_type="audio",
                                                 key="file_v3_9", data=b"OggS-voice",
                                                 duration=2500))  # fmt: skip
        image = await asyncio.wait_for(bus.next_inbound(), 30)
        voice = await asyncio.wait_for(bus.next_inbound(), 30)
        (a,) = image.attachments
        assert (image.sender_id, image.text, a.kind) == (ALICE, "", "image")
        assert await a.fetch(25_000_000) == pic
        (v,) = voice.attachments
        assert (v.kind, v.duration_s) == ("audio", 2.5)
        assert await v.fetch(25_000_000) == b"OggS-voice"
        assert [d[1:] for d in feishu.downloads] == [("img_v2_1", "image"), ("file_v3_9", "file")]
