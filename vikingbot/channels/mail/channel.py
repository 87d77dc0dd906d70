"""The email channel: a mailbox the bot reads by IMAP and sends from by SMTP.

Inbound (:mod:`vikingbot.channels.mail.inbox`): unseen mail from ``allow_from``
addresses (and the owner's) becomes a turn in the chat ``email:<sender>``, in the
thread of its Message-ID; anyone else's mail is left unread, logged and audited.
Bounces, auto-replies and list mail are never answered.

Outbound (aiosmtplib): one mail per outbox row, Markdown as text plus HTML, with a
Message-ID derived from the row's key (a resend after a crash carries the same id).
A reply in a thread carries ``In-Reply-To``/``References`` and ``Re:`` its subject;
any other mail's subject is ``subject_prefix: <first line>``. SMTP answers 4xx,
timeouts and dropped connections are retried by the outbox; 5xx, a refused login
or a refused recipient are not.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Any, ClassVar, NamedTuple

from loguru import logger

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, has_secret
from vikingbot.channels.mail import trust
from vikingbot.channels.mail.address import check_address, clean_subject, subject_for
from vikingbot.channels.mail.body import Mail
from vikingbot.channels.mail.compose import compose
from vikingbot.channels.mail.files import MailFile
from vikingbot.channels.mail.inbox import MAIL_FETCH_MAX, Fetched, ImapWatch, Verdict, close
from vikingbot.channels.mail.settings import EmailSettings
from vikingbot.channels.mail.thread import message_id_of, thread_of
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, VikingbotError

THREADS_KEPT = 2000
STOP_WAIT_S = 5.0  # how long stop waits for the cancelled IMAP loop


class ThreadInfo(NamedTuple):
    """What a reply in a thread needs from the mail that began it."""

    message_id: str
    subject: str
    references: tuple[str, ...]


def _attachment(file: MailFile) -> Attachment:
    """A file of a fetched mail (the sender passed the allow list before the fetch)."""

    async def fetch(limit: int) -> bytes:
        if file.data is None:
            raise ValueError(
                f"it lies past the first {MAIL_FETCH_MAX // 1_000_000} MB of the mail, "
                "which is all the bot fetches"
            )
        return file.data

    size = None if file.data is None else len(file.data)
    return Attachment(file.name, fetch, mime=file.mime, size=size)


def _smtp_error(exc: Exception, where: str) -> ChannelError:
    """An aiosmtplib error as a :class:`ChannelError` (4xx and transport: retried)."""
    import aiosmtplib

    text = f"SMTP {where}: {type(exc).__name__}: {exc}"
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError | aiosmtplib.SMTPRecipientsRefused):
        return ChannelRejected(text)
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        if 400 <= exc.code < 500:
            return (
                ChannelBusy(text, None) if exc.code in (421, 450, 451, 452) else ChannelError(text)
            )
        return ChannelRejected(text)
    if isinstance(exc, aiosmtplib.SMTPNotSupported):
        return ChannelRejected(text)
    return ChannelError(text)


class EmailChannel(Channel):
    name: ClassVar[str] = "email"
    settings: ClassVar[type[ChannelBase]] = EmailSettings
    max_message_chars: ClassVar[int | None] = None  # one mail holds any result
    exclusive_inbound: ClassVar[bool] = True  # one reader per mailbox (docs/scaling.md)

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, EmailSettings)
        self.mail: EmailSettings = config
        self.watch: ImapWatch | None = None
        self._task: asyncio.Task[Any] | None = None
        self._threads: OrderedDict[str, ThreadInfo] = OrderedDict()

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, EmailSettings)
        missing = [
            key
            for key, ok in (
                ("address", section.address),
                ("password", has_secret(section.password)),
                ("smtp_host", section.smtp_host),
            )
            if not ok
        ]
        notes = [] if section.imap_host else ["no imap_host: can send, cannot receive"]
        if section.imap_host and section.require_auth_results and not section.authserv_id:
            notes.append(
                "no authserv_id: every mail is refused until it names the receiving server "
                "(or require_auth_results is false)"
            )
        if "none" in (section.smtp_security, section.imap_security):
            notes.append("a connection without TLS: use it only on loopback")
        return Problems(missing, notes)

    # ---- lifecycle --------------------------------------------------------------

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        if self._task is not None or not self.mail.imap_host:
            return
        self.watch = ImapWatch(
            self.mail,
            judge=self._judge,
            take=self._take,
            report=self.report_loop,
            senders=self._senders(),
            unreadable=self._unreadable,
        )
        self._task = self.spawn(f"channel:{self.name}:imap", self.watch.run)
        logger.info("email: reading {} on {}", self.mail.folder, self.mail.imap_host)

    async def stop_receiving(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=STOP_WAIT_S)
            if not done:
                logger.warning("email: the IMAP loop did not end within {:g} s", STOP_WAIT_S)

    @property
    def receiving(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        await self.stop_receiving()
        self._bus = None

    def _senders(self) -> list[str] | None:
        """Whose mail the IMAP search asks for: the allowed addresses and the owner's
        (None: anyone's, with ``allow_from`` ``"*"``)."""
        allow = self.config.allow_from
        if "*" in allow:
            return None
        found = [a.casefold() for a in allow]
        if self.owner_chat is not None and "@" in self.owner_chat:
            found.append(self.owner_chat.casefold())
        return sorted(set(found))

    # ---- inbound ----------------------------------------------------------------

    def _own(self, sender: str) -> bool:
        return self.mail.address is not None and sender.casefold() == self.mail.address.casefold()

    async def _judge(self, mail: Mail) -> Verdict:
        """From the header alone: fetch this mail (an allowed person wrote it, and the
        receiving server vouches for the From domain) or leave it."""
        sender = mail.sender
        if sender is None:
            unknown = InboundMessage(self.name, "(unbelieved From)", "(unbelieved From)", "")
            await self.refuse(unknown, mail.problem or "the mail names no sender")
            return "leave"
        if self._own(sender):
            return "leave"
        if mail.automatic:
            logger.info("email: left an automatic mail from {} ({!r})", sender, mail.subject)
            return "leave"
        who = sender.casefold()
        if not self.allowed(who, who):
            await self.accept(InboundMessage(self.name, who, who, ""))  # refused and audited
            return "leave"
        if self.mail.require_auth_results:
            vouched = self._vouched(mail, who)
            if not vouched.passed:
                reason = f"the receiving server did not vouch for it: {vouched.reason}"
                await self.refuse(InboundMessage(self.name, who, who, ""), reason)
                return "leave"
        return "take"

    def _vouched(self, mail: Mail, sender: str) -> trust.Verdict:
        if self.mail.authserv_id is None:
            return trust.Verdict(
                False, "no authserv_id is set (or set require_auth_results false: docs/channels.md)"
            )
        domain = sender.rpartition("@")[2]
        return trust.verdict_from(list(mail.auth_results), self.mail.authserv_id, domain)

    async def _unreadable(self, fetched: Fetched) -> None:
        """A mail from an allowed sender that cannot be read: logged, audited, the owner
        told once (per mail), then skipped (the IMAP side marks it seen and flagged)."""
        mail = fetched.mail
        sender = (mail.sender or "?").casefold()
        why = mail.problem or "unreadable"
        logger.warning(
            "email: mail {} from {} ({!r}) not answered: {}", fetched.uid, sender, mail.subject, why
        )
        if self._store is not None:
            await asyncio.to_thread(
                self._audit_unreadable, sender, why, {"uid": fetched.uid, "subject": mail.subject}
            )
        text = (
            f"A mail from {sender} ({mail.subject or 'no subject'}) was not answered: {why}. "
            "It is marked read and flagged in the bot's mailbox."
        )
        await self.tell_owner(f"email:unreadable:{mail.message_id or fetched.uid}", text)

    def _audit_unreadable(self, sender: str, why: str, details: dict[str, Any]) -> None:
        assert self._store is not None
        try:
            self._store.audit(
                f"channel:{self.name}",
                "inbound.unreadable",
                sender,
                "skipped",
                reason=why,
                details=details,
            )
        except VikingbotError:
            logger.exception("email: could not write the audit record")

    async def _take(self, fetched: Fetched) -> None:
        mail = fetched.mail
        sender = (mail.sender or "").casefold()
        if mail.problem is not None or not sender:
            logger.warning(
                "email: mail {} from {} ({!r}) not answered: {}",
                fetched.uid,
                sender or "?",
                mail.subject,
                mail.problem,
            )
            return
        thread = thread_of(mail.message_id) if mail.message_id else None
        if thread is not None and mail.message_id is not None:
            self._remember(thread, ThreadInfo(mail.message_id, mail.subject, mail.references))
        logger.info("email: mail {} from {} ({!r}) taken", fetched.uid, sender, mail.subject)
        text = f"Subject: {mail.subject}\n\n{mail.text}" if mail.subject else mail.text
        await self.accept(
            InboundMessage(
                channel=self.name,
                chat_id=sender,
                sender_id=sender,
                text=text,
                thread=thread,
                metadata={"message_id": mail.message_id or "", "subject": mail.subject},
                attachments=tuple(_attachment(f) for f in mail.files),
            )
        )

    def _remember(self, thread: str, info: ThreadInfo) -> None:
        self._threads[thread] = info
        self._threads.move_to_end(thread)
        while len(self._threads) > THREADS_KEPT:
            self._threads.popitem(last=False)

    # ---- outbound ---------------------------------------------------------------

    def _reply_headers(self, msg: OutboundMessage) -> tuple[str, str | None, tuple[str, ...]]:
        """(subject, In-Reply-To, References) for ``msg``."""
        prefix = self.mail.subject_prefix
        if msg.thread is None:
            return subject_for(msg.text, prefix), None, ()
        known = self._threads.get(msg.thread)
        if known is not None:
            subject = known.subject or subject_for(msg.text, prefix)
            if not subject.lower().startswith("re:"):
                subject = f"Re: {subject}"
            return clean_subject(subject), known.message_id, known.references
        parent = message_id_of(msg.thread)  # after a restart: the id, not the subject
        return subject_for(msg.text, prefix), parent, ()

    async def send(self, msg: OutboundMessage) -> None:
        import aiosmtplib

        s = self.mail
        if not s.smtp_host or not s.address or s.password is None:
            raise ChannelRejected("email needs address, password and smtp_host to send")
        to = check_address(msg.chat_id, "recipient address")
        subject, parent, refs = self._reply_headers(msg)
        mail = compose(
            sender=s.address,
            to=to,
            subject=subject,
            text=msg.text,
            key=msg.dedupe_key or f"auto:{uuid.uuid4().hex}",
            when=self._clock.now(),
            in_reply_to=parent,
            references=refs,
            sender_name=s.display_name,
        )
        try:
            await aiosmtplib.send(
                mail,
                hostname=s.smtp_host,
                port=s.smtp_port,
                username=s.username or s.address,
                password=s.password.get_secret_value(),
                use_tls=s.smtp_security == "tls",
                start_tls=s.smtp_security == "starttls",
                timeout=s.timeout_s,
                # EHLO names the sender's domain: no DNS lookup of this host's name
                local_hostname=s.address.rpartition("@")[2],
            )
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise _smtp_error(exc, f"{s.smtp_host} to {to}") from exc
        logger.info("email: sent {} to {}", mail["Message-ID"], to)

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        """``doctor --live``: a test mail to ``owner_chat`` (else the bot's own address) by
        SMTP, and an IMAP login; :class:`ChannelError` naming what failed."""
        assert isinstance(section, EmailSettings)
        channel = cls(section)
        to = section.owner_chat or section.address
        if to is None:
            raise ChannelRejected("no owner_chat or address to send the test mail to")
        stamp = channel._clock.now()
        text = f"A test mail from `vikingbot doctor --live` ({stamp:%Y-%m-%d %H:%M} UTC)."
        await channel.send(OutboundMessage(cls.name, to, text, dedupe_key=f"doctor:{stamp}"))
        said = f"test mail sent to {to}"
        if section.imap_host:
            watch = ImapWatch(section, judge=channel._judge, take=channel._take)
            try:
                await close(await watch.connect())
            except ChannelError:
                raise
            except Exception as exc:  # OSError, timeouts, aioimaplib's errors
                raise ChannelError(
                    f"IMAP {section.imap_host}: {type(exc).__name__}: {exc}"
                ) from exc
            said += f"; IMAP login to {section.imap_host} works"
        return said
