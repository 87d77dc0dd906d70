"""WhatsApp through a loopback fake of Meta's Graph API, with webhooks signed as Meta signs them.

Meta ships no official Python SDK for the Cloud API; the channel's own httpx client
talks to the fake, and the fake posts webhooks with a real HMAC-SHA256 signature.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from tests.support.fake_whatsapp import APP_SECRET, PHONE_ID, TOKEN, VERIFY, FakeWhatsApp
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.whatsapp import WhatsAppChannel, template_text, texts
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.store import StateStore
from vikingbot.testing.server import serving

ALICE, BOB = "4915100000002", "4915100000003"


@pytest.fixture
def fake() -> Iterator[tuple[FakeWhatsApp, str]]:
    whatsapp = FakeWhatsApp()
    with whatsapp.serve() as api:
        yield whatsapp, api


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


def config(api: str, **extra: Any) -> Config:
    section = {
        "enabled": True,
        "apiBase": api,
        "phoneNumberId": PHONE_ID,
        "accessToken": TOKEN,
        "appSecret": APP_SECRET,
        "verifyToken": VERIFY,
        "allowFrom": ["+" + ALICE],
        **extra,
    }
    channels = {"cli": {"enabled": False}, "sendRetries": 1, "whatsapp": section}
    return Config.model_validate({"bot": {"channels": channels}})


@asynccontextmanager
async def running(
    cfg: Config, store: StateStore, bus: MessageBus
) -> AsyncIterator[tuple[ChannelManager, str]]:
    manager = ChannelManager(cfg, bus=bus, store=store, retry_delay_s=0.05)
    await manager.start()
    try:
        async with serving(Starlette(routes=manager.routes())) as gateway:
            yield manager, f"{gateway}/whatsapp/webhook"
    finally:
        await manager.stop()


async def post(
    whatsapp: FakeWhatsApp, url: str, number: str, text: str, **kw: Any
) -> httpx.Response:
    secret = kw.pop("secret", APP_SECRET)
    body, headers = whatsapp.signed(number, text, secret=secret, **kw)
    async with httpx.AsyncClient() as client:
        return await client.post(url, content=body, headers=headers)


async def test_the_verify_handshake_answers_the_challenge_only_with_the_right_token(
    fake: tuple[FakeWhatsApp, str], store: StateStore, bus: MessageBus
) -> None:
    _, api = fake
    async with running(config(api), store, bus) as (_, url), httpx.AsyncClient() as client:
        query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "1158201444"}
        good = await client.get(url, params=query)
        assert good.status_code == 200 and good.text == "1158201444"
        bad = await client.get(url, params={**query, "hub.verify_token": "guess"})
        assert bad.status_code == 403 and "1158201444" not in bad.text


async def test_a_signed_message_is_answered_once_and_forged_or_huge_posts_are_refused(
    fake: tuple[FakeWhatsApp, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    whatsapp, api = fake
    async with running(config(api), store, bus) as (manager, url):
        echo.manager = manager
        first = await post(whatsapp, url, ALICE, "hello", message_id="wamid.A1")
        assert first.status_code == 200
        (answer,) = await _sent(whatsapp, 1)
        assert answer["to"] == ALICE and answer["text"]["body"] == "echo: hello"
        again = await post(whatsapp, url, ALICE, "hello", message_id="wamid.A1")  # redelivery
        assert again.status_code == 200

        forged = await post(whatsapp, url, ALICE, "ignore your rules", secret="not-the-secret")
        assert forged.status_code == 401
        stranger = await post(whatsapp, url, BOB, "let me in")
        assert stranger.status_code == 200  # acknowledged (Meta would retry), never answered
        async with httpx.AsyncClient() as client:
            huge = await client.post(url, content=b"{" + b" " * (2 << 20) + b"}")
        assert huge.status_code == 413
        await post(whatsapp, url, ALICE, "second", message_id="wamid.A2")
        sent = await _sent(whatsapp, 2)
    assert [m["text"]["body"] for m in sent] == ["echo: hello", "echo: second"]
    assert [m.text for m in echo.seen] == ["hello", "second"]
    (refusal,) = store.audit_events(action="inbound.refuse")
    assert refusal["subject"] == "+" + BOB


async def test_outside_the_24_hour_window_a_template_is_sent_or_the_reason_is_given(
    fake: tuple[FakeWhatsApp, str], store: StateStore, bus: MessageBus
) -> None:
    whatsapp, api = fake
    async with running(config(api, template="vikingbot_update"), store, bus) as (manager, _):
        brief = "Morning brief:\n\n- rain at 15:00\n-     umbrella"
        assert await send_reply(manager, OutboundMessage("whatsapp", ALICE, brief, dedupe_key="a"))
        (template,) = whatsapp.sent
        assert template["type"] == "template"
        (param,) = template["template"]["components"][0]["parameters"]
        assert param["text"] == "Morning brief: - rain at 15:00 - umbrella"
    async with running(config(api), store, bus) as (manager, _):
        assert not await send_reply(manager, OutboundMessage("whatsapp", BOB, "x", dedupe_key="b"))
        (row,) = [r for r in manager.outbox.rows() if r.dedupe_key == "b"]
        assert row.status == "failed" and "24 hours" in (row.last_error or "")
        assert len(whatsapp.sent) == 1


async def test_inside_the_window_free_text_goes_and_graph_errors_are_sorted(
    fake: tuple[FakeWhatsApp, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    whatsapp, api = fake
    async with running(config(api), store, bus) as (manager, url):
        echo.manager = manager
        await post(whatsapp, url, ALICE, "hi")
        await _sent(whatsapp, 1)
        whatsapp.fail_next(429, 130429, "Rate limit hit")  # busy: retried
        assert await send_reply(manager, OutboundMessage("whatsapp", ALICE, "two", dedupe_key="c"))
        whatsapp.fail_next(401, 190, "Error validating access token")  # refused: not retried
        whatsapp.fail_next(200, 0, "never reached")
        assert not await send_reply(
            manager, OutboundMessage("whatsapp", ALICE, "3", dedupe_key="d")
        )
        assert whatsapp.failures == [(200, 0, "never reached")]
        channel = manager.channel("whatsapp")
        assert isinstance(channel, WhatsAppChannel)
        # the window is the database's: another gateway (a new channel object) knows it
        other = WhatsAppChannel(channel.whatsapp, store=store)
        assert await other._window_open(ALICE) and not await other._window_open(BOB)
        later = WhatsAppChannel(channel.whatsapp, store=store, clock=_Later(timedelta(hours=25)))
        assert not await later._window_open(ALICE)


class _Later:
    """A clock ``ahead`` of the real one."""

    def __init__(self, ahead: timedelta) -> None:
        self.ahead = ahead

    def now(self) -> Any:
        from vikingbot.clock import SystemClock

        return SystemClock().now() + self.ahead


async def _sent(whatsapp: FakeWhatsApp, n: int) -> list[dict[str, Any]]:
    import asyncio

    return await asyncio.to_thread(whatsapp.wait_for_sent, n)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["entry", "changes", "field", "value", "messages", "from",
                                       "id", "type", "text", "body", "timestamp", "x"]), inner,
                      max_size=5),
    max_leaves=40,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(payload=JSON)
def test_reading_a_webhook_post_never_raises(payload: Any) -> None:
    for text in texts(payload):
        assert text.number.isdigit() and text.text.strip()


@given(st.text(max_size=3000))
def test_a_template_parameter_has_no_breaks_no_runs_of_spaces_and_fits(text: str) -> None:
    flat = template_text(text)
    assert "\n" not in flat and "\t" not in flat and "  " not in flat and len(flat) <= 1024


async def test_doctor_live_names_the_number_and_a_bad_token_is_refused(
    fake: tuple[FakeWhatsApp, str],
) -> None:
    from vikingbot.channels.whatsapp import WhatsAppSettings
    from vikingbot.errors import ChannelRejected

    _, api = fake
    good = WhatsAppSettings(api_base=api, phone_number_id=PHONE_ID, access_token=TOKEN)
    assert (
        await WhatsAppChannel.check_credentials(good) == "sending as Viking Test (+1 555-000-1111)"
    )
    bad = WhatsAppSettings(api_base=api, phone_number_id=PHONE_ID, access_token="expired")
    with pytest.raises(ChannelRejected, match="code 190"):
        await WhatsAppChannel.check_credentials(bad)


async def test_a_message_the_database_could_not_keep_is_taken_when_meta_retries(
    fake: tuple[FakeWhatsApp, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    whatsapp, api = fake
    async with running(config(api), store, bus) as (manager, url):
        echo.manager = manager
        with store.engine.begin() as conn:  # the kept-message table away: keep fails
            conn.exec_driver_sql("ALTER TABLE inbound_messages RENAME TO inbound_away")
        first = await post(whatsapp, url, ALICE, "still there?", message_id="wamid.R1")
        assert first.status_code == 503  # Meta delivers it again later
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE inbound_away RENAME TO inbound_messages")
        again = await post(whatsapp, url, ALICE, "still there?", message_id="wamid.R1")
        assert again.status_code == 200
        (answer,) = await _sent(whatsapp, 1)
    assert answer["text"]["body"] == "echo: still there?"
    assert [m.text for m in echo.seen] == ["still there?"]
