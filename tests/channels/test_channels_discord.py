"""Discord through discord.py against a loopback fake of Discord's REST API and gateway.

The SDK is pointed at the fake by the channel's ``api_base`` setting; the gateway
URL is the one the fake's ``GET /gateway/bot`` returns, as on Discord.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_discord import BOT_ID, FakeDiscord
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.doctor import _channels
from vikingbot.errors import ChannelBusy
from vikingbot.store import StateStore
from vikingbot.testing.fake_openai import FakeOpenAI, tool_call

ALICE, BOB = "111111111111111111", "222222222222222222"
DM, GENERAL, GUILD = "333333333333333333", "444444444444444444", "555555555555555555"


@pytest.fixture
def fake() -> Iterator[tuple[FakeDiscord, str]]:
    discord = FakeDiscord()
    with discord.serve() as api:
        yield discord, api


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


def section(api: str, token: str, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "apiBase": api, "token": token, **extra}


def config(retries: int = 2, **discord: Any) -> Config:
    channels = {"cli": {"enabled": False}, "sendRetries": retries, "discord": discord}
    return Config.model_validate({"bot": {"channels": channels}})


def row(manager: ChannelManager) -> dict[str, Any]:
    return next(r for r in manager.status() if r["name"] == "discord")


@asynccontextmanager
async def running(cfg: Config, store: StateStore, **kw: Any) -> AsyncIterator[ChannelManager]:
    manager = ChannelManager(cfg, bus=kw.pop("bus", MessageBus()), store=store, **kw)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


async def test_a_dm_and_a_mention_are_answered_and_a_stranger_is_ignored_and_audited(
    fake: tuple[FakeDiscord, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    discord, api = fake
    cfg = config(**section(api, discord.token, allowFrom=[ALICE]))
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        assert row(manager)["running"] and manager.held() == ["discord"]
        await discord.wait_ready()
        discord.push_message(channel_id=DM, user_id=ALICE, text="**hi** there")
        (answer,) = await discord.wait_sent(1)
        assert answer["channel_id"] == DM and answer["content"] == "echo: **hi** there"
        assert answer["allowed_mentions"] == {"parse": []}  # an answer never pings

        discord.push_message(channel_id=GENERAL, user_id=ALICE, text="morning all", guild_id=GUILD)
        discord.push_message(
            channel_id=GENERAL, user_id=BOB, text=f"<@{BOT_ID}> secrets", guild_id=GUILD,
            mention_bot=True,
        )  # fmt: skip
        discord.push_message(
            channel_id=GENERAL, user_id=ALICE, text=f"<@{BOT_ID}> ping", guild_id=GUILD,
            mention_bot=True,
        )  # fmt: skip
        sent = await discord.wait_sent(2)
        assert sent[1]["channel_id"] == GENERAL and sent[1]["content"] == "echo: ping"
        (refusal,) = store.audit_events(action="inbound.refuse")
        assert refusal["subject"] == BOB
    assert [m.text for m in echo.seen] == ["**hi** there", "ping"]
    assert [m.sender_id for m in echo.seen] == [ALICE, ALICE]


async def test_a_resend_with_the_same_nonce_is_one_message_and_429_is_waited_out(
    fake: tuple[FakeDiscord, str], store: StateStore
) -> None:
    discord, api = fake
    discord.channels.add(DM)
    async with running(config(**section(api, discord.token)), store) as manager:
        discord.rate_limit_next(0.05)
        msg = OutboundMessage("discord", DM, "the build is green", dedupe_key="hb:1")
        assert await send_reply(manager, msg)
        channel = manager.channel("discord")
        assert channel is not None
        await channel.send(msg)  # a gateway that died before recording it sends it again
        assert discord.posts == 3  # the 429, the send, the resend
        assert [m["content"] for m in discord.sent] == ["the build is green"]

        discord.rate_limit_next(120)  # too long to wait inside a send: the outbox waits
        with pytest.raises(ChannelBusy) as busy:
            await channel.send(OutboundMessage("discord", DM, "later", dedupe_key="rl"))
        assert busy.value.retry_after == 120 and len(discord.sent) == 1


async def test_long_text_is_split_under_2000_and_bad_targets_are_refused_clearly(
    fake: tuple[FakeDiscord, str], store: StateStore
) -> None:
    discord, api = fake
    discord.channels.add(DM)
    async with running(config(**section(api, discord.token)), store) as manager:
        text = "\n\n".join(f"part {i} " + "x" * 1500 for i in range(3))
        assert await send_reply(manager, OutboundMessage("discord", DM, text, dedupe_key="long"))
        assert [m["content"][:6] for m in discord.sent] == ["part 0", "part 1", "part 2"]
        assert all(len(m["content"]) <= 2000 for m in discord.sent)

        nowhere = OutboundMessage("discord", "999", "hello?", dedupe_key="nowhere")
        assert not await send_reply(manager, nowhere)
        kept = Outbox(store).get("nowhere")
        assert kept is not None and kept.status == "failed"
        assert "Unknown Channel" in (kept.last_error or "")
        bad = OutboundMessage("discord", "#general", "hi", dedupe_key="bad-id")
        assert not await send_reply(manager, bad)
        kept = Outbox(store).get("bad-id")
        assert kept is not None and "channel id (digits)" in (kept.last_error or "")
        assert row(manager)["running"]


async def test_a_bad_token_is_a_clear_error_at_start_and_in_doctor(
    fake: tuple[FakeDiscord, str], store: StateStore
) -> None:
    discord, api = fake
    cfg = config(**section(api, "not-the-token"))
    async with running(cfg, store) as manager:
        status = row(manager)
        assert not status["running"]
        assert "token was refused" in status["last_error"]
    (check,) = await asyncio.to_thread(_channels, cfg, True)
    assert check.status == "fail" and "token was refused" in check.message
    (offline,) = _channels(cfg, False)
    assert offline.status == "ok"  # present; only --live asks Discord
    (good,) = await asyncio.to_thread(_channels, config(**section(api, discord.token)), True)
    assert good.status == "ok" and "vikingbot" in good.message


def test_a_heartbeat_result_reaches_the_channel_end_to_end(
    fake: tuple[FakeDiscord, str], tmp_path: Path
) -> None:
    discord, api = fake
    discord.channels.add(DM)
    with FakeOpenAI.start() as llm:
        telegram = FakeTelegram()
        with telegram.serve() as tg_api:
            home = Home(tmp_path / "home", llm, telegram, tg_api)
            home.write_config(
                owner=f"discord:{DM}",
                channels={
                    "telegram": {"enabled": False},
                    "discord": section(api, discord.token, allowFrom=[ALICE]),
                },
            )
            home.add_user_session()
            home.write_heartbeat(with_tasks("- Check whether the nightly build is green"))
            llm.script(
                [tool_call("message", {"text": "The nightly build is **red**."}), "HEARTBEAT_OK"]
            )
            gw = GatewayProcess(home.path, start_timeout_s=60).start()
            try:
                sent = poll(lambda: list(discord.sent), "the result", 30)
            finally:
                code = gw.stop()
            assert code == 0, gw.output[-4000:]
    assert [m["content"] for m in sent] == ["The nightly build is **red**."]
    assert sent[0]["channel_id"] == DM and sent[0]["nonce"]


async def test_a_picture_in_a_dm_comes_with_the_message_and_a_strangers_is_never_fetched(
    fake: tuple[FakeDiscord, str], store: StateStore, bus: MessageBus
) -> None:
    from tests.media.conftest import photo

    discord, api = fake
    pic = photo(320, 240)
    cfg = config(**section(api, discord.token, allowFrom=[ALICE]))
    async with running(cfg, store, bus=bus, retry_delay_s=0.05):
        await discord.wait_ready()
        discord.push_message(channel_id="9" * 18, user_id=BOB, text="", files=[
            ("bait.jpg", "image/jpeg", pic)])  # fmt: skip
        discord.push_message(channel_id=DM, user_id=ALICE, text="", files=[
            ("cat.jpg", "image/jpeg", pic)])  # fmt: skip
        msg = await asyncio.wait_for(bus.next_inbound(), 30)
        assert (msg.sender_id, msg.text) == (ALICE, "")
        (att,) = msg.attachments
        assert (att.name, att.mime, att.size) == ("cat.jpg", "image/jpeg", len(pic))
        assert await att.fetch(25_000_000) == pic
        assert len(discord.downloads) == 1  # Alice's only: Bob's was refused unfetched
