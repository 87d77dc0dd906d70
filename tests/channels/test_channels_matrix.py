"""Matrix through mautrix against a real Synapse homeserver on loopback.

One Synapse per test session (``tests/support/synapse.py``, started once: it takes
a few seconds); each test registers its own users and rooms. The people in the
rooms are plain HTTP clients, so what they see is the homeserver's word, not the
channel's.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from tests.support.cutting_proxy import CuttingProxy
from tests.support.databases import shared_db
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, poll, with_tasks
from tests.support.outbound import send_reply
from tests.support.steering_rig import stack_config, steering_stack
from tests.support.synapse import Synapse, SynapseMissing, User, start
from tests.support.trickle_model import TrickleModel
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.doctor import _channels
from vikingbot.gateway.registry import GatewayRegistry
from vikingbot.gateway.services import Services
from vikingbot.store import StateStore
from vikingbot.store.tables import gateways
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    try:
        server = start(tmp_path_factory.mktemp("synapse"))
    except SynapseMissing as exc:
        if os.environ.get("CI"):
            raise  # .ci/run installs it: missing there is a failure
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    """SQLite only: the outbox and leases are the same code on PostgreSQL (tests/multigw)."""
    shutil.copyfile(_sqlite_template, tmp_path / "state.db")
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


class People:
    """An admin, the bot's account and the people of one test."""

    def __init__(self, hs: Synapse) -> None:
        self.hs = hs
        self.admin = hs.register(admin=True)
        self.bot = hs.register()
        hs.unlimited(self.admin, self.bot)
        self.alice = hs.register()
        self.bob = hs.register()


@pytest.fixture
def people(synapse: Synapse) -> People:
    return People(synapse)


def section(hs: Synapse | str, token: str, **extra: Any) -> dict[str, Any]:
    url = hs.url if isinstance(hs, Synapse) else hs
    return {"enabled": True, "homeserver": url, "accessToken": token, **extra}


def config(owner: str | None = None, retries: int = 2, **matrix: Any) -> Config:
    bot: dict[str, Any] = {
        "channels": {"cli": {"enabled": False}, "sendRetries": retries, "matrix": matrix}
    }
    if owner:
        bot["owner"] = owner
    return Config.model_validate({"bot": bot})


async def seen(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Wait until ``check()`` (blocking HTTP, run in a thread) is truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        found = await asyncio.to_thread(check)
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.05)


def row(manager: ChannelManager) -> dict[str, Any]:
    """The matrix row of ``channels status``."""
    return next(r for r in manager.status() if r["name"] == "matrix")


def joined(hs: Synapse, user: User, room: str) -> set[str]:
    path = f"/_matrix/client/v3/rooms/{room}/joined_members"
    return set(hs.call(user, "GET", path)["joined"])


@asynccontextmanager
async def running(cfg: Config, store: StateStore, **kw: Any) -> AsyncIterator[ChannelManager]:
    manager = ChannelManager(cfg, bus=kw.pop("bus", MessageBus()), store=store, **kw)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


async def a_dm(hs: Synapse, person: User, bot: User) -> str:
    room = await asyncio.to_thread(hs.create_room, person, invite=[bot.user_id], direct=True)
    await seen(lambda: bot.user_id in joined(hs, person, room), "the bot join the DM")
    return room


async def test_a_dm_is_answered_in_html_and_a_strangers_invite_is_refused(
    people: People, store: StateStore, bus: MessageBus, echo: Any
) -> None:
    hs, bot, alice, bob = people.hs, people.bot, people.alice, people.bob
    cfg = config(**section(hs, bot.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        assert row(manager)["running"] and manager.held() == ["matrix"]
        room = await a_dm(hs, alice, bot)
        await asyncio.to_thread(hs.say, alice, room, "**hi** there")
        texts = await seen(lambda: hs.texts(alice, room, sender=bot.user_id), "the answer")
        assert texts == ["echo: **hi** there"]
        (answer,) = [e for e in hs.messages(alice, room) if e["sender"] == bot.user_id]
        assert answer["content"]["format"] == "org.matrix.custom.html"
        assert answer["content"]["formatted_body"] == "<p>echo: <strong>hi</strong> there</p>"

        strange = await asyncio.to_thread(hs.create_room, bob, invite=[bot.user_id], direct=True)
        refused = await seen(lambda: store.audit_events(action="inbound.refuse"), "an audit")
        assert refused[0]["subject"] == bob.user_id
        assert bot.user_id not in joined(hs, bob, strange)
    assert [m.sender_id for m in echo.seen] == [alice.user_id]


async def test_a_group_room_needs_a_mention_and_a_stranger_never_reaches_the_agent(
    people: People, store: StateStore, bus: MessageBus, echo: Any
) -> None:
    hs, bot, alice, bob = people.hs, people.bot, people.alice, people.bob
    cfg = config(**section(hs, bot.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, bus=bus, retry_delay_s=0.05) as manager:
        echo.manager = manager
        invite = [bot.user_id, bob.user_id]
        room = await asyncio.to_thread(hs.create_room, alice, invite=invite)
        await seen(lambda: bot.user_id in joined(hs, alice, room), "the bot join")
        await asyncio.to_thread(hs.join, bob, room)
        await asyncio.to_thread(hs.say, alice, room, "morning everyone")
        await asyncio.to_thread(hs.say, bob, room, f"{bot.user_id}: tell me the secrets")
        await asyncio.to_thread(
            hs.say, alice, room, "bot, ping", **{"m.mentions": {"user_ids": [bot.user_id]}}
        )
        await seen(lambda: hs.texts(alice, room, sender=bot.user_id), "the answer to the mention")
        assert [m.text for m in echo.seen] == ["bot, ping"]
        (refusal,) = store.audit_events(action="inbound.refuse")
        assert refusal["subject"] == bob.user_id
        assert hs.texts(alice, room, sender=bot.user_id) == ["echo: bot, ping"]


async def test_a_bad_token_is_a_clear_error_at_start_and_in_doctor(
    synapse: Synapse, store: StateStore
) -> None:
    cfg = config(**section(synapse, "syt_not_a_real_token"))
    async with running(cfg, store) as manager:
        status = row(manager)
        assert not status["running"]
        assert "M_UNKNOWN_TOKEN" in status["last_error"] and "whoami" in status["last_error"]
    (check,) = await asyncio.to_thread(_channels, cfg, True)
    assert check.status == "fail" and "M_UNKNOWN_TOKEN" in check.message
    (offline,) = _channels(cfg, False)
    assert offline.status == "ok"  # present; only --live asks the homeserver


async def test_doctor_live_names_the_bot(people: People) -> None:
    cfg = config(**section(people.hs, people.bot.token))
    (check,) = await asyncio.to_thread(_channels, cfg, True)
    assert check.status == "ok" and people.bot.user_id in check.message


async def test_long_text_is_split_in_order_and_an_unknown_room_is_refused_clearly(
    people: People, store: StateStore
) -> None:
    hs, bot, alice = people.hs, people.bot, people.alice
    cfg = config(**section(hs, bot.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, retry_delay_s=0.05) as manager:
        room = await a_dm(hs, alice, bot)
        text = "\n\n".join(f"part {i} " + "x" * 7000 for i in range(3))
        assert await send_reply(manager, OutboundMessage("matrix", room, text, dedupe_key="long"))
        bodies = hs.texts(alice, room, sender=bot.user_id)
        assert [b[:6] for b in bodies] == ["part 0", "part 1", "part 2"]
        assert all(len(b) <= 8000 for b in bodies)

        nowhere = "!nosuchroom:vikingbot.test"
        msg = OutboundMessage("matrix", nowhere, "hello?", dedupe_key="nowhere")
        assert not await send_reply(manager, msg)
        kept = Outbox(store).get("nowhere")
        assert (
            kept is not None
            and kept.status == "failed"
            and "M_FORBIDDEN" in (kept.last_error or "")
        )
        bad = OutboundMessage("matrix", "general", "hi", dedupe_key="bad-id")
        assert not await send_reply(manager, bad)
        kept = Outbox(store).get("bad-id")
        assert row is not None and "room id like !abc:example.org" in (kept.last_error or "")
        assert row(manager)["running"]


async def test_a_429_storm_is_waited_out_and_every_message_arrives_once(
    people: People, store: StateStore
) -> None:
    hs, alice = people.hs, people.alice
    stormy = hs.register()
    path = f"/_synapse/admin/v1/users/{stormy.user_id}/override_ratelimit"
    hs.call(people.admin, "POST", path, {"messages_per_second": 4, "burst_count": 2})
    cfg = config(retries=8, **section(hs, stormy.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, retry_delay_s=0.1) as manager:
        room = await a_dm(hs, alice, stormy)
        sends = [
            send_reply(manager, OutboundMessage("matrix", room, f"n{i}", dedupe_key=f"s{i}"))
            for i in range(8)
        ]
        assert all(await asyncio.gather(*sends))
    assert sorted(hs.texts(alice, room, sender=stormy.user_id)) == sorted(f"n{i}" for i in range(8))


async def test_a_disconnect_mid_send_is_retried_with_the_same_transaction(
    people: People, store: StateStore
) -> None:
    hs, bot, alice = people.hs, people.bot, people.alice
    async with CuttingProxy(hs.port) as proxy:
        cfg = config(**section(proxy.url, bot.token, allowFrom=[alice.user_id]))
        async with running(cfg, store, retry_delay_s=0.05) as manager:
            room = await a_dm(hs, alice, bot)
            proxy.lose_next(b"/send/m.room.message/", hold=False)
            msg = OutboundMessage("matrix", room, "disk 91% full", dedupe_key="hb:disk")
            assert await send_reply(manager, msg)
            assert proxy.lost.is_set()
    assert hs.texts(alice, room, sender=bot.user_id) == ["disk 91% full"]
    row = Outbox(store).get("hb:disk")  # aiohttp itself or the outbox sent it again
    assert row is not None and row.status == "sent"


def _silent(store: StateStore, gateway_id: str) -> None:
    """A gateway that stopped beating a minute ago (its process was killed)."""
    with store.engine.begin() as conn:
        row = conn.execute(gateways.select().where(gateways.c.id == gateway_id)).one()
        seen_at = row.seen_at - timedelta(seconds=60)
        conn.execute(update(gateways).where(gateways.c.id == gateway_id).values(seen_at=seen_at))


async def test_a_gateway_killed_mid_send_leaves_one_message_in_the_room(
    people: People, tmp_path: Path
) -> None:
    hs, bot, alice = people.hs, people.bot, people.alice
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with StateStore.open(url) as store_a, StateStore.open(url) as store_b:
        async with CuttingProxy(hs.port) as proxy:
            cfg = config(retries=0, **section(proxy.url, bot.token, allowFrom=[alice.user_id]))
            GatewayRegistry(store_a, SystemClock(), gateway_id="gw-a").register()
            async with running(cfg, store_a, sender="gw-a") as a:
                room = await a_dm(hs, alice, bot)
                proxy.lose_next(b"/send/m.room.message/", hold=True)
                msg = OutboundMessage("matrix", room, "backup failed", dedupe_key="cron:bk:1")
                sending = asyncio.create_task(send_reply(a, msg))
                await proxy.lost.wait()
                sending.cancel()  # the process is gone: nothing more is written
                await asyncio.gather(sending, return_exceptions=True)
        _silent(store_a, "gw-a")
        assert hs.texts(alice, room, sender=bot.user_id) == ["backup failed"]
        row = Outbox(store_b).get("cron:bk:1")
        assert row is not None and row.possibly_sent

        GatewayRegistry(store_b, SystemClock(), gateway_id="gw-b").register()
        async with running(config(**section(hs, bot.token)), store_b, sender="gw-b") as b:
            assert await b.wait_recovered() == 1
        assert hs.texts(alice, room, sender=bot.user_id) == ["backup failed"]
        row = Outbox(store_b).get("cron:bk:1")
        assert row is not None and row.status == "sent"


async def test_a_revoked_token_shows_in_health_and_the_owner_hears_once(
    people: People, store: StateStore
) -> None:
    hs, alice = people.hs, people.alice
    doomed = hs.register()
    told: list[str] = []

    async def tell(key: str, text: str) -> None:
        told.append(key)

    services = Services(asyncio.Event(), tell=tell, first_delay_s=0.05, max_delay_s=0.2)

    def spawn(name: str, factory: Any) -> asyncio.Task[Any]:
        task = services.spawn(name, factory, "channels", awaited_on_stop=False).task
        assert task is not None
        return task

    cfg = config(retries=0, **section(hs, doomed.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, spawn=spawn) as manager:
        room = await a_dm(hs, alice, doomed)
        await asyncio.to_thread(hs.logout, doomed)
        await seen(lambda: services.problems(), "the receive loop fail")
        (problem,) = services.problems()
        assert problem.startswith("service channel:matrix restarting after: ChannelRejected")
        assert "M_UNKNOWN_TOKEN" in problem
        await seen(lambda: services.states["channel:matrix"].restarts >= 2, "two restarts")
        # one key however often it crashes: the gateway's Notifier tells the owner once per key
        assert set(told) == {"service-crash:channel:matrix:ChannelRejected"}
        msg = OutboundMessage("matrix", room, "still there?", dedupe_key="after-logout")
        assert not await send_reply(manager, msg)
        row = Outbox(store).get("after-logout")
        assert (
            row is not None
            and row.status == "failed"
            and "M_UNKNOWN_TOKEN" in (row.last_error or "")
        )


def test_a_heartbeat_result_reaches_the_room_end_to_end(people: People, tmp_path: Path) -> None:
    hs, bot, alice = people.hs, people.bot, people.alice
    room = asyncio.run(a_dm_sync(hs, alice, bot))
    with FakeOpenAI.start() as llm:
        telegram = FakeTelegram()
        with telegram.serve() as api:
            home = Home(tmp_path / "home", llm, telegram, api)
            home.write_config(
                owner=f"matrix:{room}",
                channels={
                    "telegram": {"enabled": False},
                    "matrix": section(hs, bot.token, allowFrom=[alice.user_id]),
                },
            )
            home.add_user_session()
            home.write_heartbeat(with_tasks("- Check whether the nightly build is green"))
            llm.script(
                [tool_call("message", {"text": "The nightly build is **red**."}), "HEARTBEAT_OK"]
            )
            gw = GatewayProcess(home.path, start_timeout_s=60).start()
            try:
                texts = poll(lambda: hs.texts(alice, room, sender=bot.user_id), "the result", 30)
            finally:
                code = gw.stop()
            assert code == 0, gw.output[-4000:]
    assert texts == ["The nightly build is **red**."]
    (event,) = [e for e in hs.messages(alice, room) if e["sender"] == bot.user_id]
    assert "<strong>red</strong>" in event["content"]["formatted_body"]


async def a_dm_sync(hs: Synapse, person: User, bot: User) -> str:
    """A DM the bot's account joined itself (no gateway runs yet)."""
    room = await asyncio.to_thread(hs.create_room, person, invite=[bot.user_id], direct=True)
    await asyncio.to_thread(hs.join, bot, room)
    return room


async def test_two_gateways_on_postgresql_one_receives_and_the_other_takes_over(
    people: People, pg_url: str, tmp_path: Path, bus: MessageBus, echo: Any
) -> None:
    """Both gateways send; only the lease holder follows /sync, so each message is
    answered once; after the holder stops, the other receives from where it stopped."""
    hs, bot, alice = people.hs, people.bot, people.alice
    db = next(iter(shared_db("postgresql", tmp_path, pg_url)))
    cfg = config(**section(hs, bot.token, allowFrom=[alice.user_id]))
    cfg.bot.gateway.lease_s = 3
    room = await a_dm_sync(hs, alice, bot)
    with db.open() as store_a, db.open() as store_b:
        for name, st in (("gw-a", store_a), ("gw-b", store_b)):
            GatewayRegistry(st, SystemClock(), gateway_id=name).register()
        a = ChannelManager(cfg, bus=bus, store=store_a, sender="gw-a")
        b = ChannelManager(cfg, bus=bus, store=store_b, sender="gw-b")
        echo.manager = a
        try:
            await a.start()
            await b.start()
            assert (a.held(), b.held()) == (["matrix"], [])
            await asyncio.to_thread(hs.say, alice, room, "first")
            await seen(lambda: hs.texts(alice, room, sender=bot.user_id), "the first answer")
            await a.stop()  # releases the lease
            echo.manager = b
            await asyncio.to_thread(hs.say, alice, room, "second")
            await seen(lambda: b.held() == ["matrix"], "gw-b take the lease")
            await seen(
                lambda: len(hs.texts(alice, room, sender=bot.user_id)) >= 2, "the second answer"
            )
        finally:
            await a.stop()
            await b.stop()
    assert hs.texts(alice, room, sender=bot.user_id) == ["echo: first", "echo: second"]
    assert [m.text for m in echo.seen] == ["first", "second"]


def upload(hs: Synapse, user: User, data: bytes, name: str, mime: str) -> str:
    """``data`` in the homeserver's media repository; its ``mxc://`` URI."""
    answer = hs.http.post(
        f"/_matrix/media/v3/upload?filename={name}",
        content=data,
        headers={"Authorization": f"Bearer {user.token}", "Content-Type": mime},
    )
    answer.raise_for_status()
    return str(answer.json()["content_uri"])


async def test_a_photo_and_a_voice_note_are_fetched_through_the_authenticated_media_api(
    people: People, store: StateStore, tmp_path: Path
) -> None:
    from tests.media.conftest import photo, speech
    from vikingbot.clock import SystemClock
    from vikingbot.media import MediaIntake

    hs, bot, alice = people.hs, people.bot, people.alice
    pic = photo(1024, 768)
    voice = speech(tmp_path, "see you at noon").read_bytes()
    bus = MessageBus()
    cfg = config(**section(hs, bot.token, allowFrom=[alice.user_id]))
    async with running(cfg, store, bus=bus, retry_delay_s=0.05):
        room = await a_dm(hs, alice, bot)
        pic_uri = await asyncio.to_thread(upload, hs, alice, pic, "desk.jpg", "image/jpeg")
        info = {"mimetype": "image/jpeg", "size": len(pic), "w": 1024, "h": 768}
        await asyncio.to_thread(
            hs.say, alice, room, "my desk", msgtype="m.image", url=pic_uri, info=info,
            filename="desk.jpg",
        )  # fmt: skip
        got = await asyncio.wait_for(bus.next_inbound(), 30)
        assert got.text == "my desk"  # filename beside body: the body is the caption
        (att,) = got.attachments
        assert (att.name, att.kind, att.size) == ("desk.jpg", "image", len(pic))
        assert await att.fetch(25_000_000) == pic  # /_matrix/client/v1/media/download
        legacy = hs.http.get(f"/_matrix/media/v3/download/{pic_uri[len('mxc://') :]}")
        assert legacy.status_code == 404  # why the legacy path is not used

        ogg_uri = await asyncio.to_thread(upload, hs, alice, voice, "voice.ogg", "audio/ogg")
        await asyncio.to_thread(
            hs.say, alice, room, "voice.ogg", msgtype="m.audio", url=ogg_uri,
            info={"mimetype": "audio/ogg", "size": len(voice), "duration": 1500},
            **{"org.matrix.msc3245.voice": {}},
        )  # fmt: skip
        got = await asyncio.wait_for(bus.next_inbound(), 30)
        assert got.text == ""
        intake = MediaIntake(lambda: cfg, clock=SystemClock(), environ={})
        taken = await intake.take(
            got.attachments, workspace=tmp_path / "ws", chat="m", sender=alice.user_id,
            source="matrix",
        )  # fmt: skip
        assert taken.refused == ["no-transcription"]  # fetched, measured, kept in inbox/
        kept = next((tmp_path / "ws/inbox").glob("*-voice.ogg"))
        assert kept.read_bytes() == voice


async def test_commands_and_an_approval_by_reply_in_a_group_room(
    people: People, tmp_path: Path
) -> None:
    """Steering (issue 44): a command answered without the model, an approval question
    answered by a reply in a group room, where a third person's "yes" is refused."""
    hs, bot, alice, bob = people.hs, people.bot, people.alice, people.bob
    hs.unlimited(people.admin, alice)
    matrix = {
        "enabled": True,
        "homeserver": hs.url,
        "accessToken": bot.token,
        "allowFrom": [alice.user_id, bob.user_id],
        "groupMessages": "all",
    }
    with FakeOpenAI.start() as model:
        model.script(
            [tool_call("write_file", {"path": "note.txt", "content": "hi"}), reply("written")]
        )
        config = stack_config(model, owner="telegram:1", channels={"matrix": matrix})
        async with steering_stack(tmp_path, config) as s:
            room = await asyncio.to_thread(hs.create_room, alice, invite=[bot.user_id, bob.user_id])
            await asyncio.to_thread(hs.join, bob, room)

            def bot_says() -> list[str]:
                return hs.texts(alice, room, sender=bot.user_id)

            await seen(lambda: bot.user_id in joined(hs, alice, room), "the bot join")
            await asyncio.to_thread(hs.say, alice, room, "/status")
            (status,) = await seen(bot_says, "the /status answer")
            assert status.startswith(f"Session: matrix:default:{room}")
            assert model.requests == []

            await asyncio.to_thread(hs.say, alice, room, "please write a note")
            question = (await seen(lambda: bot_says()[1:], "the approval question"))[0]
            assert question.startswith("Allow write_file?") and 'Reply "yes" or "no"' in question
            await asyncio.to_thread(hs.say, bob, room, "yes")
            refusal = (await seen(lambda: bot_says()[2:], "bob's answer refused"))[0]
            assert refusal.startswith("Only the person this turn answers")
            await asyncio.to_thread(hs.say, alice, room, "yes")
            await seen(lambda: bot_says()[4:], "the reply after the approval")
            assert bot_says()[3:] == ["Approved: write_file", "written"]
            assert (s.home.paths.workspace_root / "shared" / "note.txt").read_text() == "hi"
            assert [e["actor"] for e in s.audit("approval.refuse")] == [f"chat:{bob.user_id}"]


async def test_a_streamed_reply_is_one_event_edited_with_m_replace(
    people: People, tmp_path: Path
) -> None:
    """Live replies (issue 44): the preview is one event, edited in place (``m.replace``),
    and the last edit is exactly the reply."""
    hs, bot, alice = people.hs, people.bot, people.alice
    hs.unlimited(people.admin, alice)
    words = [f"word{i} " for i in range(30)] + ["**end**"]
    matrix = {
        "enabled": True,
        "homeserver": hs.url,
        "accessToken": bot.token,
        "allowFrom": [alice.user_id],
        "streamReplies": True,
    }
    with TrickleModel.start(words, every_s=0.1) as model:  # 3 s of writing
        config = stack_config(model, owner="telegram:1", channels={"matrix": matrix})
        async with steering_stack(tmp_path, config):
            room = await a_dm(hs, alice, bot)
            await asyncio.to_thread(hs.say, alice, room, "write a lot")

            def edits() -> list[dict[str, Any]]:
                mine = [e for e in hs.messages(alice, room) if e["sender"] == bot.user_id]
                return [e for e in mine if "m.new_content" in e["content"]]

            last = await seen(
                lambda: [e for e in edits() if "<strong>end</strong>" in str(e["content"])],
                "the final edit",
            )
            originals = [
                e
                for e in hs.messages(alice, room)
                if e["sender"] == bot.user_id and "m.new_content" not in e["content"]
            ]
            assert len(originals) == 1  # one message, edited
            final = last[-1]["content"]["m.new_content"]
            assert final["body"] == "".join(words)
            assert final["formatted_body"].endswith("<strong>end</strong></p>")
            assert last[-1]["content"]["m.relates_to"]["event_id"] == originals[0]["event_id"]
            assert 2 <= len(edits()) <= 4  # paced at one every 2 s, the final one included
