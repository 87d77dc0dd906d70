"""The email channel against a real Dovecot (IMAP) and a real SMTP server (aiosmtpd).

Mail goes in by LMTP, the channel reads it with aioimaplib, the echo agent answers
through delivery and the channel manager, aiosmtplib sends it, and it lands in the
sender's own Dovecot mailbox, where the test reads it with the standard library.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from tests.support.mailrig import BOT, FRIEND, OWNER, STRANGER, MailRig
from tests.support.outbound import delivery_for
from vikingbot.bus import MessageBus
from vikingbot.channels.mail.channel import EmailChannel
from vikingbot.channels.mail.compose import message_id_for
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.outbox import Outbox
from vikingbot.delivery.types import OutboundMessage
from vikingbot.store.db import StateStore

Eventually = Callable[..., Awaitable[None]]


@pytest.fixture(scope="module")
def rig() -> Iterator[MailRig]:
    with MailRig.started() as started:
        yield started


@pytest.fixture
def store(tmp_path: Path, _sqlite_template: Path) -> Iterator[StateStore]:
    """SQLite only: the channel keeps nothing of its own in the database."""
    path = tmp_path / "state.db"
    shutil.copyfile(_sqlite_template, path)
    with StateStore.open(f"sqlite:///{path}") as st:
        yield st


async def started(config: Config, bus: MessageBus, store: Any) -> ChannelManager:
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    return manager


def replies_to(rig: MailRig, user: str, subject_part: str) -> list[Any]:
    return [m for m in rig.inbox(user) if subject_part in str(m["Subject"])]


async def arrived(rig: MailRig, user: str, subject_part: str, count: int = 1) -> list[Any]:
    """Wait (reading the mailbox from a thread, so the channel keeps running) for mail."""
    deadline = time.monotonic() + 30
    while True:
        found = await asyncio.to_thread(replies_to, rig, user, subject_part)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no mail {subject_part!r} for {user} within 30 s: {found}")
        await asyncio.sleep(0.05)


def plain(msg: Any) -> str:
    return str(msg.get_body(("plain",)).get_content()).replace("\r\n", "\n")


async def test_a_mail_from_an_allowed_sender_is_answered_in_its_thread(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    eventually: Eventually,
) -> None:
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    try:
        ident = rig.mail_to_bot(
            OWNER,
            "Lunch plans",
            "Shall we meet at noon?\n\nOn Mon, 1 Jan 2026, Bot <bot@example.test> wrote:\n> old text\n",
        )
        (reply,) = await arrived(rig, OWNER, "Lunch plans")
        assert reply["Subject"] == "Re: Lunch plans"
        assert reply["In-Reply-To"] == ident
        assert ident in reply["References"]
        assert reply["From"].addresses[0].addr_spec == BOT
        text = plain(reply)
        assert "echo: Subject: Lunch plans\n\nShall we meet at noon?" in text
        assert "old text" not in text
        assert reply.get_body(("html",)) is not None
        assert echo.seen[0].chat_id == OWNER and echo.seen[0].sender_id == OWNER
    finally:
        await manager.stop()


@pytest.fixture
def logs() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    yield lines
    logger.remove(sink)


def _attachment(size: int) -> Callable[[EmailMessage], None]:
    def build(msg: EmailMessage) -> None:
        msg.add_attachment(
            b"\0" * size, maintype="application", subtype="octet-stream", filename="big.bin"
        )

    return build


def _html_only(msg: EmailMessage) -> None:
    msg.set_content("<p>only <b>html</b></p>", subtype="html")


def _no_text(msg: EmailMessage) -> None:
    msg.set_content(b"\x89PNG....", maintype="image", subtype="png")


async def test_a_strangers_mail_is_left_unread_and_never_fetched(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    """The IMAP search asks for the allowed senders only: a stranger's mail stays on the
    server unread (the mailbox's owner still sees it), and reaches no one."""
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    sent_before = len(rig.relay.received)
    try:
        rig.mail_to_bot(STRANGER, "Wire me money s1", "Urgent!")
        rig.mail_to_bot(FRIEND, "After the stranger s1", "hello")
        await arrived(rig, FRIEND, "After the stranger s1")
        assert [m.sender_id for m in echo.seen] == [FRIEND]
        assert len(rig.relay.received) == sent_before + 1  # only the friend's answer
        assert rig.relay.received[-1].recipients == [FRIEND]
        unread = await asyncio.to_thread(rig.dovecot.unseen_subjects, BOT)
        assert "Wire me money s1" in unread  # the mailbox owner still sees it unread
        assert "After the stranger s1" not in unread
    finally:
        await manager.stop()


@pytest.mark.parametrize(
    ("label", "build", "answered", "logged"),
    [
        ("no text part", _no_text, False, "has no text part"),
        ("html only", _html_only, True, None),
        ("20 MB attachment", _attachment(20 * 1024 * 1024), True, None),
    ],
)
async def test_awkward_mails_are_answered_or_logged_and_nothing_goes_elsewhere(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    logs: list[str],
    label: str,
    build: Callable[[EmailMessage], None],
    answered: bool,
    logged: str | None,
) -> None:
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    sent_before = len(rig.relay.received)
    try:
        rig.mail_to_bot(OWNER, f"Awkward {label}", "the text of it", build=build)
        rig.mail_to_bot(OWNER, f"Plain after {label}", "plain")
        await arrived(rig, OWNER, f"Plain after {label}")
        replies = await asyncio.to_thread(replies_to, rig, OWNER, f"Awkward {label}")
        assert len(replies) == (1 if answered else 0)
        assert len(rig.relay.received) == sent_before + len(replies) + 1
        assert all(e.recipients == [OWNER] for e in rig.relay.received[sent_before:])
        if logged is not None:
            assert any(logged in line and f"Awkward {label}" in line for line in logs), logs
        if label == "html only":
            assert "only html" in plain(replies[0])
        if label == "20 MB attachment":
            assert "the text of it" in plain(replies[0])
    finally:
        await manager.stop()


async def test_broken_mime_is_logged_and_the_gateway_goes_on(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    logs: list[str],
) -> None:
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    try:
        rig.raw_to_bot(
            b"From: owner@example.test\r\nTo: bot@example.test\r\nSubject: Broken mime b1\r\n"
            b"Message-ID: <broken.1@example.test>\r\nMIME-Version: 1.0\r\n"
            b'Content-Type: multipart/mixed; boundary="never-closed"\r\n\r\n'
            b"--never-closed\r\nContent-Type: text/plain; charset=no-such-charset\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\n!!!not base64\xff\xfe\r\n"
        )
        rig.mail_to_bot(OWNER, "Plain after b1", "plain")
        await arrived(rig, OWNER, "Plain after b1")
        assert manager.channel("email").receiving  # type: ignore[union-attr]
        assert [m.metadata["subject"] for m in echo.seen][-1] == "Plain after b1"
    finally:
        await manager.stop()


@pytest.mark.parametrize(
    "target",
    ["email:owner@example.test\r\nBcc: stranger@example.test", "email:stranger@example.test"],
)
async def test_a_header_injection_or_a_stranger_in_a_target_reaches_nobody_else(
    rig: MailRig, store: Any, make_config: Callable[..., Config], target: str, tmp_path: Path
) -> None:
    config = make_config(owner=f"email:{OWNER}", email=rig.section())
    manager = await started(config, MessageBus(), store)
    sent_before = len(rig.relay.received)
    try:
        report = await delivery_for(manager).deliver(
            "The result of h1", target, source="heartbeat", dedupe_key=f"h1:{target}"
        )
        assert report.status == "delivered"
        assert [e.recipients for e in rig.relay.received[sent_before:]] == [[OWNER]]
        assert "Bcc" not in rig.relay.received[-1].content.decode()
    finally:
        await manager.stop()


async def test_a_subject_with_line_breaks_stays_one_header(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    sent_before = len(rig.relay.received)
    try:
        rig.raw_to_bot(
            b"From: owner@example.test\r\nTo: bot@example.test\r\n"
            b"Subject: =?utf-8?q?Injected_i1=0D=0ABcc=3A_stranger=40example.test?=\r\n"
            b"Message-ID: <inject.1@example.test>\r\n\r\nhello\r\n"
        )
        (reply,) = await arrived(rig, OWNER, "Injected i1")
        assert reply["Subject"] == "Re: Injected i1 Bcc: stranger@example.test"
        assert reply["Bcc"] is None
        assert [e.recipients for e in rig.relay.received[sent_before:]] == [[OWNER]]
    finally:
        await manager.stop()


async def _until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def _email(manager: ChannelManager) -> EmailChannel:
    channel = manager.channel("email")
    assert isinstance(channel, EmailChannel)
    return channel


async def test_polling_without_idle_answers_too(
    rig: MailRig, store: Any, bus: MessageBus, echo: Any, make_config: Callable[..., Config]
) -> None:
    manager = await started(make_config(email=rig.section(idle=False, pollS=0.2)), bus, store)
    echo.manager = manager
    try:
        channel = _email(manager)
        assert channel.watch is not None
        await _until(channel.watch.connected.is_set, "the IMAP connection")
        rig.mail_to_bot(OWNER, "Polled p1", "are you there?")
        (reply,) = await arrived(rig, OWNER, "Polled p1")
        assert not channel.watch.idling
        assert "are you there?" in plain(reply)
    finally:
        await manager.stop()


async def test_an_imap_server_that_drops_the_connection_is_read_again_when_back(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    logs: list[str],
) -> None:
    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    channel = _email(manager)
    try:
        assert channel.watch is not None
        await _until(lambda: channel.watch and channel.watch.idling, "IDLE")
        await asyncio.to_thread(rig.dovecot.stop)
        await _until(lambda: channel.last_error, "the channel to notice")
        assert "127.0.0.1" in str(channel.last_error)
        assert any(line.startswith("email: IMAP") for line in logs)
        row = next(r for r in manager.status() if r["name"] == "email")  # /health: degraded
        assert "127.0.0.1" in str(row["failing"]) and row["running"]
        await asyncio.to_thread(rig.dovecot.start)
        rig.mail_to_bot(OWNER, "After the outage d1", "back?")
        await arrived(rig, OWNER, "After the outage d1")
        assert channel.last_error is None and channel.receiving
        assert next(r for r in manager.status() if r["name"] == "email")["failing"] is None
    finally:
        await manager.stop()
        if rig.dovecot._proc is None:
            rig.dovecot.start()


async def test_a_wrong_password_is_a_clear_error_and_nothing_is_sent(
    rig: MailRig,
    store: Any,
    bus: MessageBus,
    make_config: Callable[..., Config],
    logs: list[str],
) -> None:
    config = make_config(owner=f"email:{OWNER}", email=rig.section(password="wrong-one"))
    manager = await started(config, bus, store)
    sent_before = len(rig.relay.received)
    try:
        channel = _email(manager)
        await _until(lambda: channel.last_error, "the refused login")
        assert "refused the login of bot@example.test" in str(channel.last_error)
        report = await delivery_for(manager).deliver(
            "A result w1", "owner", source="heartbeat", dedupe_key="w1"
        )
        assert report.status != "delivered"
        row = await asyncio.to_thread(manager.outbox.get, "w1")
        assert row is not None
        assert row.status == "failed" and "SMTPAuthenticationError" in str(row.last_error)
        assert row.attempts == 1  # a refused login is not retried
        assert len(rig.relay.received) == sent_before
        assert any("refused the login" in line for line in logs)
        assert "wrong-one" not in " ".join(logs)
        assert channel.running
    finally:
        await manager.stop()


async def test_a_busy_smtp_server_is_retried_and_a_resend_keeps_the_message_id(
    rig: MailRig, store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    config = make_config(owner=f"email:{OWNER}", email=rig.section(imapHost=None))
    # a gateway wrote this row, then died before the server took it
    left = OutboundMessage("email", OWNER, "Left behind r2", dedupe_key="r2")
    Outbox(store).claim(left, "r2")
    manager = await started(config, bus, store)
    try:
        assert await manager.wait_recovered() == 1
        (again,) = await arrived(rig, OWNER, "Left behind r2")
        assert again["Message-ID"] == message_id_for("r2", BOT)
        rig.relay.answers.append("451 4.3.0 try again later")
        report = await delivery_for(manager).deliver(
            "The nightly build r1 is red",
            "email:owner@example.test",
            source="heartbeat",
            dedupe_key="r1",
        )
        assert report.status == "delivered"
        (mail,) = await arrived(rig, OWNER, "The nightly build r1")
        assert mail["Subject"] == "vikingbot: The nightly build r1 is red"
        assert mail["Message-ID"] == message_id_for("r1", BOT)
        row = await asyncio.to_thread(manager.outbox.get, "r1")
        assert row is not None and row.attempts == 2
    finally:
        await manager.stop()


async def test_attachments_and_inline_pictures_come_with_the_mail(
    rig: MailRig, store: Any, bus: MessageBus, echo: Any, make_config: Callable[..., Config]
) -> None:
    from tests.media.conftest import photo, text_pdf

    pic, pdf, inline = photo(800, 600), text_pdf("Invoice 4711"), photo(64, 48, "PNG")

    def build(msg: EmailMessage) -> None:
        msg.add_alternative('<p>see <img src="cid:chart1"></p>', subtype="html")
        html = msg.get_payload()[-1]  # type: ignore[index]
        html.add_related(inline, maintype="image", subtype="png", cid="<chart1>")
        msg.add_attachment(pic, maintype="image", subtype="jpeg", filename="desk photo.jpg")
        msg.add_attachment(pdf, maintype="application", subtype="pdf", filename="invoice.pdf")

    manager = await started(make_config(email=rig.section()), bus, store)
    echo.manager = manager
    try:
        rig.mail_to_bot(STRANGER, "Stranger's files f1", "open this", build=build)
        rig.mail_to_bot(OWNER, "My files f1", "what are these?", build=build)
        await arrived(rig, OWNER, "My files f1")
        (msg,) = [m for m in echo.seen if m.metadata["subject"] == "My files f1"]
        assert "what are these?" in msg.text
        got = {a.name: (a.mime, await a.fetch(25_000_000)) for a in msg.attachments}
        assert got == {
            "inline-3.png": ("image/png", inline),
            "desk photo.jpg": ("image/jpeg", pic),
            "invoice.pdf": ("application/pdf", pdf),
        }
        assert all(m.sender_id != STRANGER for m in echo.seen)  # its mail never fetched
        unread = await asyncio.to_thread(rig.dovecot.unseen_subjects, BOT)
        assert "Stranger's files f1" in unread
    finally:
        await manager.stop()
