"""Signal through a loopback fake of signal-cli's HTTP daemon (JSON-RPC and event stream).

signal-cli cannot register or link here, so ``tests/support/fake_signal.py`` speaks its
documented protocol; the channel's own HTTP client and event-stream reader run as in
a gateway.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fake_signal import BOT, BOT_UUID, FakeSignal
from tests.support.outbound import send_reply
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.channels.signal import chat_problem, group_chat, group_id, text_event
from vikingbot.channels.sse import SseReader
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.store import StateStore

ALICE, ALICE_UUID = "+4915100000002", "00000000-0000-4000-8000-000000000002"
BOB = "+4915100000003"
GROUP = base64.b64encode(b"g" * 32).decode()


@pytest.fixture
def fake() -> Iterator[tuple[FakeSignal, str]]:
    signal = FakeSignal()
    with signal.serve() as url:
        yield signal, url


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


def config(url: str, **extra: Any) -> Config:
    signal = {"enabled": True, "url": url, "account": BOT, "allowFrom": [ALICE], **extra}
    channels = {"cli": {"enabled": False}, "sendRetries": 2, "signal": signal}
    return Config.model_validate({"bot": {"channels": channels}})


@asynccontextmanager
async def running(cfg: Config, store: StateStore, **kw: Any) -> AsyncIterator[ChannelManager]:
    manager = ChannelManager(cfg, bus=kw.pop("bus", MessageBus()), store=store, **kw)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


async def test_a_dm_and_a_group_mention_are_answered_strangers_and_receipts_are_not(
    fake: tuple[FakeSignal, str], store: StateStore, bus: MessageBus, echo: Any
) -> None:
    signal, url = fake
    async with running(config(url), store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        await signal.wait_streams(1)
        signal.push_receipt()
        signal.push_text("hi there")
        (answer,) = await signal.wait_sent(1)
        assert answer == {"recipient": [ALICE], "message": "echo: hi there"}
        assert signal.receipts[0]["recipient"] == [ALICE]  # marked read

        signal.push_text("secrets please", number=BOB, uuid=None)  # a stranger
        signal.push_text("morning all", group=GROUP)  # a group, no mention: not addressed
        signal.push_text("what's the weather", group=GROUP, mention_bot=True)
        sent = await signal.wait_sent(2)
        group_chat_id = group_chat(GROUP)
        assert sent[1] == {"groupId": GROUP, "message": "echo: what's the weather"}
        (refusal,) = store.audit_events(action="inbound.refuse")
        assert refusal["subject"] == BOB
    assert [(m.chat_id, m.text) for m in echo.seen] == [
        (ALICE, "hi there"),
        (group_chat_id, "what's the weather"),
    ]


async def test_a_multi_account_daemon_gets_the_account_in_every_call(
    store: StateStore, bus: MessageBus, echo: Any
) -> None:
    signal = FakeSignal(multi_account=True)  # refuses a call that names no account
    with signal.serve() as url:
        async with running(config(url), store, bus=bus) as manager:
            echo.manager = manager
            await signal.wait_streams(1)
            signal.push_text("hello")
            (answer,) = await signal.wait_sent(1)
            assert answer["message"] == "echo: hello"


async def test_rate_limits_are_retried_and_an_unregistered_recipient_is_not(
    fake: tuple[FakeSignal, str], store: StateStore
) -> None:
    signal, url = fake
    async with running(config(url), store, retry_delay_s=0.05) as manager:
        signal.send_results = ["RATE_LIMIT_FAILURE"]
        assert await send_reply(manager, OutboundMessage("signal", ALICE, "one", dedupe_key="a"))
        assert [m["message"] for m in signal.sent] == ["one"]

        signal.send_results = ["UNREGISTERED_FAILURE", "SUCCESS"]
        assert not await send_reply(manager, OutboundMessage("signal", BOB, "two", dedupe_key="b"))
        assert signal.send_results == ["SUCCESS"]  # refused once, not tried again
        assert not await send_reply(
            manager, OutboundMessage("signal", "not-a-number", "x", dedupe_key="c")
        )


async def test_a_new_receiver_answers_what_came_while_none_listened_and_nothing_twice(
    fake: tuple[FakeSignal, str],
    store: StateStore,
    bus: MessageBus,
    echo: Any,
    eventually: Callable[..., Awaitable[None]],
) -> None:
    signal, url = fake
    async with running(config(url), store, bus=bus) as manager:
        echo.manager = manager
        await signal.wait_streams(1)
        signal.push_text("before the restart")
        # the reply recorded as sent (a stop mid-send would leave it for the next start)
        await eventually(lambda: echo.results == [True])
        await manager.answered(echo.seen[0])  # as the gateway's dispatch does
    signal.push_text("while it was down")  # kept in the daemon's buffer
    async with running(config(url), store, bus=bus) as manager:
        echo.manager = manager
        await eventually(lambda: echo.results == [True, True])
        await manager.answered(echo.seen[1])
        signal.push_text("after")
        await eventually(lambda: echo.results == [True, True, True])
    sent = await signal.wait_sent(3)
    assert [m["message"] for m in sent] == [
        "echo: before the restart",
        "echo: while it was down",
        "echo: after",
    ]


async def test_typing_is_shown_while_a_turn_runs_and_stopped_after(
    fake: tuple[FakeSignal, str], store: StateStore
) -> None:
    signal, url = fake
    async with running(config(url), store) as manager:
        channel = manager.channel("signal")
        assert channel is not None
        from vikingbot.bus import InboundMessage

        msg = InboundMessage("signal", ALICE, ALICE, "hi")
        await channel.answering(msg)
        await channel.answered(msg)
        assert signal.typing[0] == {"recipient": [ALICE]}
        assert signal.typing[-1] == {"recipient": [ALICE], "stop": True}


def test_chat_ids_and_group_ids_round_trip_and_bad_targets_are_named() -> None:
    chat = group_chat(GROUP)
    assert chat is not None and chat.startswith("g.") and "/" not in chat and "=" not in chat
    assert group_id(chat) == GROUP
    assert chat_problem(ALICE) is None and chat_problem(ALICE_UUID) is None
    assert chat_problem(chat) is None
    assert "not 'bob'" in (chat_problem("bob") or "")
    assert group_chat("not base64!") is None and group_id("g.") is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(payload=JSON)
def test_reading_an_event_never_raises(payload: Any) -> None:
    text_event(payload, BOT, BOT_UUID)
    text_event(
        {"envelope": {"dataMessage": payload, "sourceNumber": ALICE, "timestamp": 1}}, BOT, None
    )


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_the_event_stream_reads_the_same_however_it_is_cut(raw: bytes, cuts: list[int]) -> None:
    whole = SseReader().feed(raw)
    reader = SseReader()
    pieces, start = [], 0
    for cut in sorted(c for c in cuts if c <= len(raw)):
        pieces += reader.feed(raw[start:cut])
        start = cut
    pieces += reader.feed(raw[start:])
    assert pieces == whole


def test_the_event_stream_keeps_ids_and_drops_what_passes_its_caps() -> None:
    data = json.dumps({"envelope": {}})
    stream = f":\nid:1-1\nevent:receive\ndata:{data}\n\r\nid:1-2\r\ndata:a\r\ndata:b\r\n\r\n"
    events = SseReader().feed(stream.encode())
    assert [(e.event, e.data, e.id) for e in events] == [
        ("receive", data, "1-1"),
        ("message", "a\nb", "1-2"),
    ]
    small = SseReader(max_line=10, max_event=8)
    out = small.feed(
        b"data:" + b"x" * 50 + b"\n\ndata:ok\n\ndata:12345\ndata:12345\n\ndata:fine\n\n"
    )
    assert [e.data for e in out] == ["ok", "fine"] and small.dropped == 2


async def test_doctor_live_names_the_linked_account_and_a_dead_daemon_is_an_error(
    fake: tuple[FakeSignal, str],
) -> None:
    from vikingbot.channels.signal import SignalChannel, SignalSettings
    from vikingbot.errors import ChannelError

    _, url = fake
    line = await SignalChannel.check_credentials(SignalSettings(url=url, account=BOT))
    assert line == f"linked as {BOT} ({BOT_UUID}) at {url}"
    with pytest.raises(ChannelError, match="unreachable"):
        await SignalChannel.check_credentials(SignalSettings(url="http://127.0.0.1:9", account=BOT))


async def test_a_photo_is_fetched_only_after_the_allow_list_and_a_strangers_never(
    fake: tuple[FakeSignal, str], store: StateStore, bus: MessageBus
) -> None:
    signal, url = fake
    photo = b"\xff\xd8\xff\xe0" + b"x" * 5000
    async with running(config(url), store, bus=bus):
        await signal.wait_streams(1)
        signal.push_text("", number=BOB, uuid=None, files=(("a.jpg", "image/jpeg", b"bad"),))
        signal.push_text("my desk", files=(("desk.jpg", "image/jpeg", photo),))
        got = await asyncio.wait_for(bus.next_inbound(), 15)
        assert (got.sender_id, got.text) == (ALICE, "my desk")
        (att,) = got.attachments
        assert (att.name, att.mime, att.size) == ("desk.jpg", "image/jpeg", len(photo))
        assert signal.downloads == []  # nothing is fetched before the media intake asks
        assert await att.fetch(1_000_000) == photo
        with pytest.raises(ValueError, match="larger than"):
            await att.fetch(100)
    assert signal.downloads == ["att2", "att2"]  # the stranger's file was never asked for
