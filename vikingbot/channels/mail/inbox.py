"""The IMAP side of the email channel: wait for new mail, hand each unseen one over.

:class:`ImapWatch` keeps one connection (aioimaplib): log in, select the folder,
look for unseen mail from the allowed senders with a UID above the last one looked
at (:func:`search_query`), then wait (IDLE where the server offers it and ``idle`` is
on, else ``poll_s``), and again. For each unseen mail it fetches the header
first and asks ``judge`` whether the sender may talk to the bot; only then the
whole mail up to ``MAIL_FETCH_MAX`` (its attachments go to the media intake), or the
first ``FETCH_BYTES`` of a larger one (its attachments stay on the server). A
mail handed over is marked ``\\Seen``; one refused or automatic is left as it was
(the mailbox's owner still sees it unread) and not looked at again; one that cannot
be read is marked ``\\Seen \\Flagged``, handed to ``unreadable`` and skipped.

A dropped connection, a timeout or a refused login is logged once per new error
text, kept as ``last_error`` and tried again after a backoff (1 s doubling to
``MAX_BACKOFF_S``); the gateway goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from loguru import logger

from vikingbot.channels.mail.body import Mail, read_mail
from vikingbot.channels.mail.settings import EmailSettings
from vikingbot.clock import wait_event
from vikingbot.errors import ChannelError, ChannelRejected

if TYPE_CHECKING:
    from aioimaplib import IMAP4

FETCH_BYTES = 1024 * 1024
MAIL_FETCH_MAX = 26_000_000  # an allowed person's mail up to this is fetched whole
MAX_BACKOFF_S = 300.0
IDLE_RENEW_S = 300.0  # servers drop an IDLE after 30 min; renew well before
BATCH = 200  # UIDs handled per look; more are taken in the next round, at once
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_VALIDITY = re.compile(rb"UIDVALIDITY (\d+)")


def search_query(after_uid: int, senders: list[str] | None) -> str:
    """The ``UID SEARCH`` for unseen mail with a UID above ``after_uid``, from one of
    ``senders`` (None: from anyone). Asking the server for the allowed senders only means
    no number of strangers' unread mails can hide the owner's."""
    query = f"UNSEEN UID {after_uid + 1}:*"
    if senders is None:
        return query
    if not senders:
        return f'{query} FROM ""'  # nobody is allowed: nothing matches an empty From
    terms = [f'FROM "{address}"' for address in senders]
    while len(terms) > 1:
        right = terms.pop()
        terms[-1] = f"OR {terms[-1]} {right}"
    return f"{query} {terms[0]}"


class Fetched(NamedTuple):
    """One unseen mail: its UID, the parsed mail, and whether all of it was fetched."""

    uid: str
    mail: Mail
    complete: bool


Verdict = str  # "take" (fetch it, hand it over, mark seen) or "leave"
Judge = Callable[[Mail], Awaitable[Verdict]]
Take = Callable[[Fetched], Awaitable[None]]


async def close(imap: IMAP4, *, polite: bool = True) -> None:
    """Log out (when the connection is in a state to) and close the socket."""
    if polite:
        # asyncio.wait, not wait_for: wait_for awaits the cancelled logout, and a command
        # of aioimaplib's that does not end on cancel would hold this close (and the
        # channel's stop) for good; seen once in the full suite with the socket still open
        logout = asyncio.ensure_future(imap.logout())
        done, _ = await asyncio.wait({logout}, timeout=2)
        if done:
            with contextlib.suppress(Exception):
                logout.result()
        else:
            logout.cancel()
    transport = getattr(imap.protocol, "transport", None)
    if transport is not None:
        transport.close()
    for task in list(imap.tasks):
        task.cancel()


def _literal(lines: list[Any]) -> bytes | None:
    for line in lines:
        if isinstance(line, bytearray | memoryview):
            return bytes(line)
    return None


def _size(lines: list[Any]) -> int | None:
    for line in lines:
        if isinstance(line, bytes) and (found := _SIZE.search(line)):
            return int(found.group(1))
    return None


class ImapWatch:
    """Watches one IMAP folder; :meth:`run` returns only when cancelled."""

    def __init__(
        self,
        settings: EmailSettings,
        *,
        judge: Judge,
        take: Take,
        report: Callable[[str | None], None] | None = None,
        senders: list[str] | None = None,
        unreadable: Callable[[Fetched], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.senders = senders
        self.unreadable = unreadable
        self.last_uid = 0  # the highest UID looked at (kept across connections)
        self._validity: bytes | None = None
        self._report = report or (lambda _error: None)
        self.judge = judge
        self.take = take
        self.last_error: str | None = None
        self.connected = asyncio.Event()
        self.idling = False
        self._lost = asyncio.Event()

    # ---- the loop ---------------------------------------------------------------

    async def run(self) -> None:
        backoff = 1.0
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except ChannelError as exc:
                self._failed(str(exc), backoff)
            except Exception as exc:  # supervisor boundary: OSError, timeouts, aioimaplib's
                self._failed(  # Abort/Error/CommandTimeout; the loop goes on
                    f"IMAP {self.settings.imap_host}: {type(exc).__name__}: {exc}", backoff
                )
            else:
                backoff = 1.0
                continue
            self.connected.clear()
            self.idling = False
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _failed(self, text: str, backoff: float) -> None:
        if text != self.last_error:
            logger.error("email: {}; trying again in {:g}s", text, backoff)
        else:
            logger.debug("email: {} (again); trying again in {:g}s", text, backoff)
        self.last_error = text
        self._report(text)

    async def _session(self) -> None:
        imap = await self.connect()
        try:
            self.connected.set()
            if self.last_error is not None:
                logger.info("email: connected to {} again", self.settings.imap_host)
            self.last_error = None
            self._report(None)
            use_idle = self.settings.idle and imap.has_capability("IDLE")
            while not self._lost.is_set():
                await self._take_new(imap)
                if use_idle:
                    await self._idle(imap)
                else:
                    await wait_event(self._lost, self.settings.poll_s)
            raise ChannelError(f"IMAP {self.settings.imap_host}: the server closed the connection")
        finally:
            self.connected.clear()
            await close(imap, polite=not self.idling and not self._lost.is_set())
            self.idling = False

    async def connect(self) -> IMAP4:
        from aioimaplib import IMAP4, IMAP4_SSL

        s = self.settings
        if not s.imap_host or not s.address or s.password is None:
            raise ChannelRejected("email needs address, password and imap_host")
        self._lost = asyncio.Event()
        lost = self._lost

        def gone(_exc: Exception | None) -> None:
            lost.set()

        imap: IMAP4
        if s.imap_security == "tls":
            imap = IMAP4_SSL(
                s.imap_host,
                s.imap_port,
                timeout=s.timeout_s,
                ssl_context=ssl.create_default_context(),
            )
            imap.protocol.conn_lost_cb = gone
        else:
            imap = IMAP4(s.imap_host, s.imap_port, timeout=s.timeout_s, conn_lost_cb=gone)
        try:
            await imap.wait_hello_from_server()
            await self._log_in(imap)
        except BaseException:
            await close(imap, polite=False)
            raise
        return imap

    async def _log_in(self, imap: IMAP4) -> None:
        s = self.settings
        assert s.address is not None and s.password is not None
        answer = await imap.login(s.username or s.address, s.password.get_secret_value())
        if answer.result != "OK":
            said = b" ".join(x for x in answer.lines if isinstance(x, bytes))
            raise ChannelRejected(
                f"IMAP {s.imap_host} refused the login of {s.username or s.address}: "
                f"{said.decode('utf-8', 'replace').strip()}"
            )
        selected = await imap.select(s.folder)
        if selected.result != "OK":
            raise ChannelRejected(f"IMAP {s.imap_host}: cannot open folder {s.folder!r}")
        said = b" ".join(x for x in selected.lines if isinstance(x, bytes))
        validity = found.group(1) if (found := _VALIDITY.search(said)) else None
        if validity != self._validity:  # another folder's UIDs: look at all unseen again
            self._validity, self.last_uid = validity, 0

    async def _idle(self, imap: IMAP4) -> None:
        idle = await imap.idle_start(timeout=IDLE_RENEW_S)
        self.idling = True
        push = asyncio.ensure_future(imap.wait_server_push())
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({push, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.idling = False
            push.cancel()
            lost.cancel()
        if self._lost.is_set():
            idle.cancel()
            return
        imap.idle_done()
        await asyncio.wait_for(idle, self.settings.timeout_s)

    # ---- one look ---------------------------------------------------------------

    async def _take_new(self, imap: IMAP4) -> None:
        await imap.noop()  # the server tells new mail at a command's end: ask for it now
        while True:
            query = search_query(self.last_uid, self.senders)
            found = await imap.uid_search(query, charset=None)
            if found.result != "OK":
                raise ChannelError(f"IMAP {self.settings.imap_host}: SEARCH failed: {found.lines}")
            first = found.lines[0] if found.lines else b""
            words = first.split() if isinstance(first, bytes) else []
            # ``n:*`` also matches the last mail when n is past it: keep only newer UIDs
            uids = sorted(u for w in words if w.isdigit() and (u := int(w)) > self.last_uid)
            for uid in uids[:BATCH]:
                await self._one(imap, str(uid))
                self.last_uid = max(self.last_uid, uid)
            if len(uids) <= BATCH:
                return

    async def _one(self, imap: IMAP4, uid: str) -> None:
        head = await imap.uid("fetch", uid, "(RFC822.SIZE BODY.PEEK[HEADER])")
        header = _literal(head.lines) if head.result == "OK" else None
        if header is None:
            return
        size = _size(head.lines) or 0
        try:
            verdict = await self.judge(read_mail(header, complete=False))
        except Exception:  # supervisor boundary for one mail: it is skipped, the loop goes on
            logger.exception("email: mail {} could not be judged; skipped", uid)
            return
        if verdict != "take":
            return
        # an allowed person's mail: all of it up to MAIL_FETCH_MAX (its files are taken
        # in), a larger one only its start (the text)
        limit = size if 0 < size <= MAIL_FETCH_MAX else FETCH_BYTES
        whole = await imap.uid("fetch", uid, f"(BODY.PEEK[]<0.{limit}>)")
        raw = _literal(whole.lines) if whole.result == "OK" else None
        if raw is None:
            logger.warning("email: could not fetch mail {} ({})", uid, whole.lines[-1:])
            return
        complete = size <= limit
        fetched = Fetched(uid, read_mail(raw, complete=complete), complete)
        flags = "(\\Seen)"
        try:
            if fetched.mail.problem is not None and self.unreadable is not None:
                flags = "(\\Seen \\Flagged)"  # marked: the owner's mail client shows it
                await self.unreadable(fetched)
            else:
                await self.take(fetched)
        except Exception:  # supervisor boundary for one mail, as above
            logger.exception("email: mail {} could not be handed over; skipped", uid)
            flags = "(\\Seen \\Flagged)"
        stored = await imap.uid("store", uid, "+FLAGS", flags)
        if stored.result != "OK":
            logger.warning("email: could not mark mail {} seen: {}", uid, stored.lines[-1:])
