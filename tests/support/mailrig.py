"""Dovecot and an SMTP relay in front of it: a mail system on loopback for the email channel.

with MailRig.started() as rig:
    rig.section()                            # bot.channels.email for the bot's mailbox
    rig.mail_to_bot("owner@example.test", "Subject", "text")   # lands in the bot's INBOX
    rig.inbox("owner@example.test")          # what arrived for the owner
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import EmailMessage, Message
from typing import Any

import pytest

from tests.support.dovecot import Dovecot, available
from tests.support.smtp import Relay

BOT = "bot@example.test"
OWNER = "owner@example.test"
STRANGER = "stranger@example.test"
FRIEND = "friend@example.test"
USERS = (BOT, OWNER, STRANGER, FRIEND)
AUTHSERV = "mx.example.test"  # the receiving server's name in Authentication-Results


def vouched(raw: bytes, value: str = f"{AUTHSERV}; dmarc=pass header.from=example.test") -> bytes:
    """``raw`` as the receiving server hands it on: its own ``Authentication-Results``
    (``value``) on top (Dovecot's LMTP then adds its trace headers above it)."""
    return f"Authentication-Results: {value}\r\n".encode() + raw


_ids = itertools.count(1)


def need_dovecot() -> None:
    """Skip when Dovecot is missing, except in CI (.ci/run installs it: fail there)."""
    why = available()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; .ci/run should have installed it")
    pytest.skip(why)


@dataclass
class MailRig:
    dovecot: Dovecot
    relay: Relay

    @classmethod
    @contextlib.contextmanager
    def started(cls, *, idle: bool = True) -> Iterator[MailRig]:
        need_dovecot()
        with Dovecot.started(USERS, idle=idle) as dovecot:
            users = {u: dovecot.password for u in USERS}
            with Relay.started(dovecot, users) as relay:
                yield cls(dovecot, relay)

    def section(self, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "enabled": True,
            "address": BOT,
            "password": self.dovecot.password,
            "imapHost": "127.0.0.1",
            "imapPort": self.dovecot.imap_port,
            "imapSecurity": "none",
            "smtpHost": "127.0.0.1",
            "smtpPort": self.relay.port,
            "smtpSecurity": "none",
            "allowFrom": [OWNER, FRIEND],
            "timeoutS": 5,
            "authservId": AUTHSERV,
        }
        base.update(extra)
        return base

    def mail_to_bot(
        self,
        sender: str,
        subject: str,
        text: str,
        *,
        message_id: str | None = None,
        build: Callable[[EmailMessage], None] | None = None,
    ) -> str:
        """Deliver a mail from ``sender`` into the bot's INBOX; its Message-ID."""
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = BOT
        msg["Subject"] = subject
        ident = message_id or f"<m{next(_ids)}.{time.monotonic_ns()}@example.test>"
        msg["Message-ID"] = ident
        msg.set_content(text)
        if build is not None:
            build(msg)
        self.dovecot.deliver(vouched(msg.as_bytes()), BOT, sender)
        return ident

    def raw_to_bot(self, raw: bytes, sender: str = OWNER, *, server: bytes | None = None) -> None:
        """``raw`` into the bot's INBOX; ``server`` the receiving server's own whole
        Authentication-Results value (default: dmarc passed), b"" for none."""
        if server is None:
            raw = vouched(raw)
        elif server:
            raw = vouched(raw, server.decode())
        self.dovecot.deliver(raw, BOT, sender)

    def inbox(self, user: str) -> list[Message]:
        return self.dovecot.messages(user)
