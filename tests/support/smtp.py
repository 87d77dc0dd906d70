"""An SMTP server (aiosmtpd) on a loopback port that hands each mail to Dovecot by LMTP.

    with Relay.started(dovecot, users={"bot@example.test": PASSWORD}) as smtp:
        smtp.port; smtp.received      # envelopes, in arrival order
        smtp.answers.append("451 4.3.0 try again later")   # the next DATA gets this

It asks for AUTH (PLAIN/LOGIN; over plain TCP, which aiosmtpd allows when told:
this is loopback) and refuses a wrong password as a real server does.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

from tests.support.dovecot import Dovecot
from tests.support.ports import free_port


class _LoopbackController(Controller):
    """aiosmtpd warns about AUTH without TLS on every connection; this is loopback."""

    def factory(self) -> SMTP:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Requiring AUTH while not requiring TLS")
            return super().factory()


@dataclass
class Envelope:
    sender: str
    recipients: list[str]
    content: bytes


@dataclass
class Relay:
    dovecot: Dovecot
    users: dict[str, str]
    port: int = 0
    received: list[Envelope] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # forced answers to the next DATAs
    cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    @contextlib.contextmanager
    def started(cls, dovecot: Dovecot, users: dict[str, str]) -> Iterator[Relay]:
        relay = cls(dovecot, users, free_port())
        controller = _LoopbackController(
            relay,
            hostname="127.0.0.1",
            server_hostname="mail.example.test",  # not getfqdn(): a DNS lookup
            port=relay.port,
            authenticator=relay._authenticate,
            auth_required=True,
            auth_require_tls=False,
            ready_timeout=30.0,  # aiosmtpd's 1 s is too short on a loaded CI machine
        )
        controller.start()
        try:
            yield relay
        finally:
            controller.stop()

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if isinstance(auth_data, LoginPassword):
            user = auth_data.login.decode()
            if self.users.get(user) == auth_data.password.decode():
                return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.cond:
            if self.answers:
                return self.answers.pop(0)
        content = envelope.original_content or envelope.content
        for rcpt in envelope.rcpt_tos:
            self.dovecot.deliver(content, rcpt, envelope.mail_from)
        with self.cond:
            self.received.append(Envelope(envelope.mail_from, list(envelope.rcpt_tos), content))
            self.cond.notify_all()
        return "250 OK"
