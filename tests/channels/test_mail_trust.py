"""Strangers stay out of the email channel, and no mail stops it.

The pure parts (``trust.sender_from``, ``trust.verdict_from``, ``read_mail``'s bounds) are
table- and hypothesis-tested; the rest runs against a real Dovecot: the tricks of
``tests/support/mailtricks.py``, a 1,000-deep nested multipart, and 200 unread strangers'
mails before the owner's.
"""

from __future__ import annotations

import asyncio
import smtplib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.channels.test_channels_email import arrived, store  # noqa: F401 (fixture)
from tests.support import mailtricks
from tests.support.mailrig import BOT, OWNER, STRANGER, MailRig, vouched
from vikingbot.bus import MessageBus
from vikingbot.channels.mail.body import read_mail
from vikingbot.channels.mail.inbox import search_query
from vikingbot.channels.mail.trust import sender_from, verdict_from
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config


def nested_multipart(depth: int, sender: str = OWNER, subject: str = "deep") -> bytes:
    out = [f"From: {sender}\r\nTo: {BOT}\r\nSubject: {subject}\r\n".encode()]
    out.append(f"Message-ID: <{subject.replace(' ', '.')}@example.test>\r\n".encode())
    for i in range(depth):
        out.append(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i))
    out.append(b"Content-Type: text/plain\r\n\r\nhi\r\n")
    out.extend(b"--b%d--\r\n" % i for i in reversed(range(depth)))
    return b"".join(out)


# ---------------------------------------------------------------- pure


@pytest.mark.parametrize("trick", mailtricks.FROM_TRICKS, ids=lambda t: t.label)
def test_no_from_trick_names_the_owner(trick: mailtricks.Trick) -> None:
    mail = read_mail(mailtricks.mail(trick, "x"), complete=False)
    assert mail.sender in (None, STRANGER)
    if mail.sender is None:
        assert mail.problem and "From" in mail.problem


@pytest.mark.parametrize(
    ("raw", "sender"),
    [
        ("Ann <owner@example.test>", OWNER),
        ('"Smith, Ann" <owner@example.test>', OWNER),
        ("owner@example.test", OWNER),
        ("owner@example.test (Ann)", OWNER),
        ("=?utf-8?q?Ann_M=C3=BCller?= <owner@example.test>", OWNER),
        ('"owner@example.test" <owner@example.test>', OWNER),
        ("Ann <OWNER@Example.Test>", "OWNER@example.test"),
    ],
)
def test_genuine_from_headers_name_their_sender(raw: str, sender: str) -> None:
    assert sender_from([raw]) == (sender, None)


@pytest.mark.parametrize(
    ("results", "passed"),
    [
        (["mx.example.test; dmarc=pass header.from=example.test"], True),
        (["MX.Example.Test; dmarc=pass"], True),
        (["mx.example.test; dkim=pass header.d=example.test"], True),
        (["mx.example.test; dkim=pass header.i=@example.test"], True),
        (["mx.example.test; dkim=pass header.d=sub.example.test"], False),
        (["mx.example.test; dkim=pass header.d=test"], False),
        (["mx.example.test; dmarc=fail", "mx.example.test; dmarc=pass"], False),
        (["other.test; dmarc=pass", "mx.example.test; dmarc=pass"], False),
        (["mx.example.test.evil; dmarc=pass"], False),
        (["mx.example.test; spf=pass smtp.mailfrom=example.test"], False),
        (["mx.example.test; dmarc=pass (dmarc=fail) header.from=example.test"], True),
        (["mx.example.test; dmarc=none header.from=example.test"], False),
        ([], False),
    ],
)
def test_only_the_topmost_verdict_of_the_configured_server_counts(
    results: list[str], passed: bool
) -> None:
    verdict = verdict_from(results, "mx.example.test", "example.test")
    assert verdict.passed is passed, verdict.reason


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.lists(st.text(max_size=200), max_size=3))
def test_the_trust_parsers_are_total(header: str, results: list[str]) -> None:
    found = sender_from([header])
    assert (found.address is None) != (found.problem is None)
    assert isinstance(verdict_from(results, "mx.example.test", "example.test").reason, str)


def test_a_mail_nested_a_thousand_deep_is_read_for_its_header_only_and_fast() -> None:
    raw = nested_multipart(1000)
    started = time.monotonic()
    mail = read_mail(raw)
    assert time.monotonic() - started < 1.0
    assert mail.sender == OWNER and mail.text == ""
    assert mail.problem is not None and "multipart parts" in mail.problem


def test_the_search_asks_for_the_allowed_senders_after_the_last_uid() -> None:
    assert search_query(0, None) == "UNSEEN UID 1:*"
    assert search_query(41, ["a@x.org"]) == 'UNSEEN UID 42:* FROM "a@x.org"'
    assert (
        search_query(7, ["a@x.org", "b@x.org", "c@x.org"])
        == 'UNSEEN UID 8:* OR FROM "a@x.org" OR FROM "b@x.org" FROM "c@x.org"'
    )


# ---------------------------------------------------------------- real Dovecot


@pytest.fixture(scope="module")
def rig() -> Iterator[MailRig]:
    with MailRig.started() as started:
        yield started


class Told:
    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    async def __call__(self, key: str, text: str) -> bool:
        if key in self.notes:
            return False
        self.notes[key] = text
        return True


async def running(config: Config, bus: MessageBus, db: Any, told: Told) -> ChannelManager:
    manager = ChannelManager(config, bus=bus, store=db, retry_delay_s=0.01, tell=told)
    await manager.start()
    return manager


async def test_no_trick_reaches_the_agent_and_each_refusal_is_audited(
    rig: MailRig,
    store: Any,  # noqa: F811
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    manager = await running(make_config(email=rig.section()), bus, store, Told())
    echo.manager = manager
    tricks = mailtricks.FROM_TRICKS + mailtricks.VERDICT_TRICKS
    try:
        for n, trick in enumerate(tricks):
            rig.raw_to_bot(mailtricks.mail(trick, f"Trick t{n}"), STRANGER, server=trick.server)
        for n, trick in enumerate(mailtricks.GENUINE):
            rig.raw_to_bot(mailtricks.mail(trick, f"Genuine g{n}"), OWNER, server=trick.server)
        await arrived(rig, OWNER, "Genuine g1")
        await arrived(rig, OWNER, "Genuine g0")
        assert sorted(m.metadata["subject"] for m in echo.seen) == ["Genuine g0", "Genuine g1"]
        events = store.audit_events(action="inbound.refuse")
        reasons = " | ".join(e["reason"] for e in events)
        assert "did not vouch" in reasons and "display name holds another address" in reasons
        assert all(e["reason"] != "sender not in allow_from" or e["subject"] for e in events)
        unread = await asyncio.to_thread(rig.dovecot.unseen_subjects, BOT)
        assert all(f"Trick t{n}" in unread for n in range(len(tricks)))
    finally:
        await manager.stop()


async def test_a_poison_mail_is_flagged_told_once_and_the_next_mail_answered(
    rig: MailRig,
    store: Any,  # noqa: F811
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
) -> None:
    told = Told()
    manager = await running(make_config(email=rig.section()), bus, store, told)
    echo.manager = manager
    try:
        rig.raw_to_bot(nested_multipart(1000, subject="Poison p1"))
        rig.mail_to_bot(OWNER, "After the poison p1", "still there?")
        await arrived(rig, OWNER, "After the poison p1")
        channel = manager.channel("email")
        assert channel is not None and channel.receiving and channel.loop_error is None
        (note,) = [t for k, t in told.notes.items() if k.startswith("email:unreadable")]
        assert "Poison p1" in note and "multipart parts" in note
        (event,) = store.audit_events(action="inbound.unreadable")
        assert event["subject"] == OWNER and "multipart" in event["reason"]
        unread = await asyncio.to_thread(rig.dovecot.unseen_subjects, BOT)
        assert "Poison p1" not in unread
    finally:
        await manager.stop()


async def test_two_hundred_unread_strangers_do_not_hide_the_owners_mail(
    rig: MailRig,
    store: Any,  # noqa: F811
    bus: MessageBus,
    echo: Any,
    make_config: Callable[..., Config],
    tmp_path: Path,
) -> None:
    with smtplib.LMTP("127.0.0.1", rig.dovecot.lmtp_port) as lmtp:
        for n in range(200):
            raw = f"From: {STRANGER}\r\nSubject: Newsletter n{n}\r\n\r\nbuy\r\n".encode()
            lmtp.sendmail(STRANGER, [BOT], vouched(raw))
    manager = await running(
        make_config(email=rig.section(idle=False, pollS=0.2)), bus, store, Told()
    )
    echo.manager = manager
    try:
        rig.mail_to_bot(OWNER, "Through the crowd c1", "hello")
        await arrived(rig, OWNER, "Through the crowd c1")
        assert [m.metadata["subject"] for m in echo.seen] == ["Through the crowd c1"]
    finally:
        await manager.stop()
