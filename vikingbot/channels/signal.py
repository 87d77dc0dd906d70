"""Signal through signal-cli's HTTP daemon: its event stream in, JSON-RPC ``send`` out.

A plug-in in all but location: its settings model is here (:class:`SignalSettings`,
section ``bot.channels.signal``) and one entry point registers it (docs/channels.md
has the recipe: ``signal-cli link``, then ``signal-cli -a +NUMBER daemon --http``).

Inbound: a receive loop (run through ``Channel.spawn``, so a gateway supervises it)
follows ``GET /api/v1/events`` (server-sent events, read by :mod:`channels.sse` with
caps). A person's text passes the allow-list (their number or UUID, or the group's
chat id); in a group only a message that mentions the bot is taken unless
``group_messages`` is ``all``; a DM always. One gateway receives at a time
(``exclusive_inbound``). A taken message is claimed once across gateways
(:class:`~vikingbot.channels.kept.FirstTake`, by sender and timestamp) and written to
the state database before the stream moves on (:class:`~vikingbot.channels.kept.
KeptInbound`), so a gateway killed mid-turn loses nothing: another answers it. The
server time of the newest handled message is kept (``channels/position.py``); a new
receiver asks the daemon to replay its buffer (``Last-Event-ID``) and skips what is
older. While a turn runs the sender sees "typing" (renewed every ``TYPING_EVERY_S``)
and, when ``read_receipts`` is on, their message is marked read. Files a person sends
become :class:`~vikingbot.bus.Attachment` s, fetched through ``getAttachment`` only when
the media intake asks (after the allow list).

Outbound: ``send`` to a number, UUID or group. Signal has no idempotency key, so a
piece whose sender died between the send and the outbox's record of it is sent again
after the restart (at least once; docs/channels.md). Chat ids: a number (``+49…``), a
UUID, or ``g.`` and the group id in URL-safe base64 (delivery targets allow no ``/``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

from loguru import logger

from vikingbot.bus import Attachment, InboundMessage, MessageBus
from vikingbot.channels.base import Channel, Problems, ReceiveLoop
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected, NotConfiguredError

if TYPE_CHECKING:
    import httpx

    from vikingbot.channels.kept import FirstTake, KeptInbound

MENTION = "\ufffc"  # Signal puts this character where a mention sits in the text
TYPING_EVERY_S = 10.0  # Signal clients drop a typing indicator after about 15 s
TAKE_KEEP_S = 24 * 3600.0  # how long a taken message id is remembered across gateways
MAX_TEXT = 32_000  # longer inbound text is cut (a Signal message is far shorter)
MAX_FILES = 10  # attachments taken from one message
GROUP = "g."
KEEPALIVE_S = 2.0
SAFE_TO_REPEAT = frozenset(
    {"sendTyping", "sendReceipt", "getUserStatus", "listAccounts", "getAttachment"}
)
REJECTED_RESULTS = {
    "UNREGISTERED_FAILURE": "the recipient is not on Signal",
    "IDENTITY_FAILURE": "the recipient's safety number changed; trust it with signal-cli",
    "PROOF_REQUIRED_FAILURE": "Signal asks for a captcha (signal-cli submitRateLimitChallenge)",
}


class SignalSettings(ChannelBase):
    """``bot.channels.signal``: the common channel keys plus these."""

    url: str = "http://127.0.0.1:8080"  # where `signal-cli daemon --http` listens
    account: str | None = None  # the bot's own number (+E.164) as linked in signal-cli
    group_messages: Literal["mentions", "all"] = "mentions"
    read_receipts: bool = True
    typing: bool = True
    send_timeout_s: float = 30.0


class SignalFile(NamedTuple):
    """An attachment of a received message, as the daemon describes it."""

    id: str  # the daemon's name for it (``getAttachment``)
    name: str
    mime: str | None
    size: int | None


class SignalText(NamedTuple):
    """A person's text message from the event stream."""

    number: str | None
    uuid: str | None
    group: str | None  # the chat id of its group (``g.…``), None in a DM
    text: str
    ts: int  # the sender's timestamp: with the sender, Signal's id of the message
    server_ts: int  # when Signal's server received it (orders messages across senders)
    mentioned: bool
    files: tuple[SignalFile, ...] = ()  # attachments, not downloaded yet

    @property
    def sender(self) -> str:
        return self.number or self.uuid or ""

    @property
    def chat(self) -> str:
        return self.group or self.sender

    @property
    def key(self) -> str:
        return f"{self.uuid or self.number}:{self.ts}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value and len(value) <= 200 else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def group_chat(group_id: str) -> str | None:
    """The chat id of a group id (standard base64), or None when it is not one."""
    try:
        raw = base64.b64decode(group_id, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    return GROUP + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def group_id(chat: str) -> str | None:
    """The group id (standard base64) of a ``g.…`` chat id, or None."""
    if not chat.startswith(GROUP) or len(chat) <= len(GROUP):
        return None
    body = chat[len(GROUP) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    return base64.b64encode(raw).decode() if raw else None


def files_of(data: dict[str, Any]) -> tuple[SignalFile, ...]:
    """The attachments a ``dataMessage`` lists (total; at most ``MAX_FILES``)."""
    found: list[SignalFile] = []
    items = data.get("attachments")
    for item in (items if isinstance(items, list) else [])[:MAX_FILES]:
        item = _dict(item)
        ident = _str(item.get("id"))
        if ident is None:
            continue
        mime = _str(item.get("contentType"))
        name = _str(item.get("filename")) or ident
        size = _int(item.get("size"))
        found.append(SignalFile(ident, name, mime, size if size is None or size >= 0 else None))
    return tuple(found)


def text_event(payload: Any, me: str | None, my_uuid: str | None) -> SignalText | None:
    """A :class:`SignalText` for a person's text or files in one event's data, else None
    (total)."""
    envelope = _dict(_dict(payload).get("envelope"))
    data = _dict(envelope.get("dataMessage"))
    body = data.get("message")
    body = body if isinstance(body, str) else ""
    files = files_of(data)
    if not body.strip() and not files:
        return None  # receipts, typing, sync messages of our own sends, reactions ...
    number, uuid = _str(envelope.get("sourceNumber")), _str(envelope.get("sourceUuid"))
    if number is None and uuid is None:
        number = _str(envelope.get("source"))
    if (number is not None and number == me) or (uuid is not None and uuid == my_uuid):
        return None
    ts = _int(envelope.get("timestamp")) or _int(data.get("timestamp"))
    if (number is None and uuid is None) or ts is None:
        return None
    server_ts = _int(envelope.get("serverReceivedTimestamp")) or ts
    group = None
    gid = _dict(data.get("groupInfo")).get("groupId")
    if isinstance(gid, str):
        group = group_chat(gid)
        if group is None:
            return None
    mentions = data.get("mentions")
    mine = [
        m
        for m in (mentions if isinstance(mentions, list) else [])
        if isinstance(m, dict)
        and (
            (me is not None and m.get("number") == me)
            or (my_uuid is not None and m.get("uuid") == my_uuid)
        )
    ]
    text = body[:MAX_TEXT]
    if mine:
        text = text.replace(MENTION, "", 1).lstrip(" :,") or text
    return SignalText(number, uuid, group, text, ts, server_ts, bool(mine), files)


def _rpc_error(error: Any, what: str) -> ChannelError:
    """A JSON-RPC error of signal-cli as a :class:`ChannelError`."""
    error = _dict(error)
    code, message = _int(error.get("code")), str(error.get("message") or "")[:300]
    text = f"Signal {what} failed: {message} (JSON-RPC error {code})"
    if "rate limit" in message.lower() or "429" in message:
        return ChannelBusy(text)
    if code in (-1, -4, -32600, -32601, -32602):  # user error, untrusted key, bad request
        return ChannelRejected(text)
    return ChannelError(text)


def _send_failure(result: Any, what: str) -> ChannelError | None:
    """What went wrong for a recipient of a ``send`` result, or None when all got it."""
    results = _dict(result).get("results")
    for item in results if isinstance(results, list) else []:
        kind = _dict(item).get("type")
        if kind in (None, "SUCCESS"):
            continue
        if kind == "RATE_LIMIT_FAILURE":
            return ChannelBusy(f"Signal {what}: rate limited")
        if kind in REJECTED_RESULTS:
            return ChannelRejected(f"Signal {what} failed: {REJECTED_RESULTS[kind]}")
        return ChannelError(f"Signal {what} failed: {kind}")
    return None


def chat_problem(chat_id: str) -> str | None:
    """Why ``chat_id`` cannot be a Signal chat, or None."""
    if chat_id.startswith(GROUP):
        return None if group_id(chat_id) else f"not a Signal group chat id: {chat_id[:80]!r}"
    if chat_id.startswith("+") and chat_id[1:].isdigit() and 6 <= len(chat_id) <= 16:
        return None
    if len(chat_id) == 36 and chat_id.count("-") == 4:
        return None
    return f"a Signal target is +<number>, a UUID or g.<group>, not {chat_id[:80]!r}"


class SignalChannel(Channel):
    name: ClassVar[str] = "signal"
    settings: ClassVar[type[ChannelBase]] = SignalSettings
    max_message_chars: ClassVar[int | None] = 2000  # Signal shows longer text as a file
    exclusive_inbound: ClassVar[bool] = True  # the daemon streams every event to each client

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        from vikingbot.channels.kept import FirstTake, KeptInbound
        from vikingbot.store.liveness import process_id

        super().__init__(config, **kwargs)
        assert isinstance(config, SignalSettings)
        self.signal = config
        self._http: httpx.AsyncClient | None = None
        self._multi = False  # the daemon serves several accounts: name ours in each call
        self.uuid: str | None = None
        self._ids = itertools.count(1)
        self._loop = ReceiveLoop(self, self._receive)
        self._last_event: str | None = None
        self._handled: int | None = None  # server time of the newest handled message
        self._typing: dict[str, asyncio.Task[None]] = {}
        store = self._store
        self.kept: KeptInbound | None = (
            KeptInbound(self.name, store, self._clock, self.gateway) if store else None
        )
        owner = self.gateway or process_id()
        self.first: FirstTake = FirstTake(self.name, store, self._clock, owner, keep_s=TAKE_KEEP_S)

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, SignalSettings)
        missing = [] if section.account else ["account"]
        return Problems(missing, [])

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        assert isinstance(section, SignalSettings)
        channel = cls(section)
        try:
            await channel._connect()
        finally:
            await channel._close()
        return f"linked as {section.account} ({channel.uuid or 'UUID unknown'}) at {section.url}"

    async def _connect(self) -> None:
        import httpx

        if not self.signal.account:
            raise NotConfiguredError("Signal needs bot.channels.signal.account (the bot's number)")
        # idle connections are dropped before the daemon's own keep-alive ends (a request
        # on a connection the server is closing fails with a bare ReadError)
        self._http = httpx.AsyncClient(
            base_url=self.signal.url.rstrip("/"),
            timeout=30.0,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S),
        )
        try:
            response = await self._http.get("/api/v1/check")
        except httpx.HTTPError as exc:
            raise ChannelError(f"Signal daemon at {self.signal.url} unreachable: {exc!r}") from exc
        if response.status_code != 200:
            raise ChannelError(f"Signal daemon at {self.signal.url}: HTTP {response.status_code}")
        try:  # a multi-account daemon knows listAccounts; a single-account one does not
            accounts = await self._call("listAccounts", {}, what="listAccounts")
        except ChannelRejected:
            self._multi = False
        else:
            self._multi = True
            numbers = [_dict(a).get("number") for a in accounts or []]
            if self.signal.account not in numbers:
                raise ChannelRejected(
                    f"the Signal daemon has no account {self.signal.account} (it has "
                    f"{', '.join(str(n) for n in numbers) or 'none'})"
                )
        status = await self._call(
            "getUserStatus", {"recipient": [self.signal.account]}, what="getUserStatus"
        )
        for item in status if isinstance(status, list) else []:
            self.uuid = _str(_dict(item).get("uuid")) or self.uuid

    async def _close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def _call(self, method: str, params: dict[str, Any], *, what: str) -> Any:
        """One JSON-RPC call; the result, or a :class:`ChannelError` naming ``what``."""
        import httpx

        if self._http is None:
            raise ChannelError("Signal channel is not started")
        if self._multi:
            params = {**params, "account": self.signal.account}
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        tries = 2 if method in SAFE_TO_REPEAT else 1  # a send is retried by the outbox
        for attempt in range(tries):
            try:
                async with asyncio.timeout(self.signal.send_timeout_s):  # not wait_for (3.11)
                    response = await self._http.post("/api/v1/rpc", json=request)
                break
            except httpx.TransportError as exc:
                if attempt + 1 < tries:
                    continue
                raise ChannelError(f"Signal {what} failed: {exc!r}") from exc
            except (httpx.HTTPError, TimeoutError) as exc:
                raise ChannelError(f"Signal {what} failed: {exc!r}") from exc
        if response.status_code >= 500:
            raise ChannelError(f"Signal {what} failed: HTTP {response.status_code}")
        try:
            answer = _dict(response.json())
        except ValueError as exc:
            raise ChannelError(f"Signal {what}: the daemon's answer is not JSON") from exc
        if "error" in answer:
            raise _rpc_error(answer["error"], what)
        return answer.get("result")

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus
        await self._connect()
        logger.info(
            "signal: linked as {} ({}) at {}", self.signal.account, self.uuid, self.signal.url
        )
        if self.kept is not None:
            self.kept.start(bus)
        if not self.defer_receiving:
            await self.start_receiving()

    async def start_receiving(self) -> None:
        if self._http is not None:
            self._loop.start()

    async def stop_receiving(self) -> None:
        await self._loop.stop()

    @property
    def receiving(self) -> bool:
        return self._loop.running

    async def stop(self) -> None:
        await self.stop_receiving()
        for task in self._typing.values():
            task.cancel()
        self._typing.clear()
        if self.kept is not None:
            await self.kept.stop()
        await self._close()

    # ---- inbound ---------------------------------------------------------

    async def _receive(self) -> None:
        """Follow the event stream until cancelled; raise :class:`ChannelError` when it
        fails (the supervisor starts it again after a pause, from where it was)."""
        import httpx

        from vikingbot.channels import position
        from vikingbot.channels.sse import SseReader

        if self._http is None:
            return
        if self._handled is None:
            self._handled = await position.stored(self._store, self.name)
        headers = {"Accept": "text/event-stream"}
        if self._last_event is not None or self._handled is not None:
            # a known id replays what came after it; an unknown one the daemon's whole
            # buffer, of which what was handled before (older than the position) is skipped
            headers["Last-Event-ID"] = self._last_event or "0"
        params = {"account": self.signal.account} if self._multi else {}
        reader = SseReader()
        try:
            async with self._http.stream(
                "GET",
                "/api/v1/events",
                params=params,
                headers=headers,
                timeout=httpx.Timeout(30.0, read=None),
            ) as response:
                if response.status_code != 200:
                    raise ChannelError(f"Signal event stream: HTTP {response.status_code}")
                self.last_error = None
                async for chunk in response.aiter_raw():
                    for event in reader.feed(chunk):
                        self._last_event = event.id or self._last_event
                        if event.event == "receive":
                            await self._event(event.data)
        except httpx.HTTPError as exc:
            error = ChannelError(f"Signal event stream failed: {exc!r}")
            self.last_error = str(error)
            raise error from exc
        self.last_error = "Signal event stream ended"
        raise ChannelError(self.last_error)

    async def _event(self, data: str) -> None:
        from vikingbot.channels import position

        try:
            payload = json.loads(data)
        except (ValueError, RecursionError):
            logger.warning("signal: an event that is not JSON was skipped")
            return
        text = text_event(payload, self.signal.account, self.uuid)
        if text is None:
            return
        if self._handled is not None and text.server_ts < self._handled:
            return  # handled by an earlier receiver (a replay of the daemon's buffer)
        await self._take(text)
        if self._handled is None or text.server_ts > self._handled:
            self._handled = text.server_ts
            await position.advance(self._store, self.name, text.server_ts, self._clock.now())

    async def _take(self, text: SignalText) -> None:
        if text.group is not None and not (text.mentioned or self.signal.group_messages == "all"):
            return
        allow = self.config.allow_from
        sender = text.uuid if text.uuid in allow and text.number not in allow else text.sender
        msg = InboundMessage(
            channel=self.name,
            chat_id=text.chat,
            sender_id=sender,
            text=text.text,
            metadata={"timestamp": text.ts, "author": text.sender, "mentioned": text.mentioned},
            attachments=tuple(self._attachment(f, text) for f in text.files),
        )
        if not self.allowed(msg.sender_id, msg.chat_id):
            await self.accept(msg)  # refused and audited there
            return
        if not await self.first.first(text.key):
            logger.info("signal: message {} was taken before (another gateway, a replay)", text.key)
            return
        if self.kept is not None:
            from vikingbot.errors import StoreError

            try:
                msg = await self.kept.keep(msg)
            except StoreError as exc:
                logger.warning(
                    "signal: message {} not kept (answered all the same): {}", text.key, exc
                )
        await self.accept(msg)
        if self.signal.read_receipts:
            with contextlib.suppress(ChannelError):
                await self._call(
                    "sendReceipt",
                    {"recipient": [text.sender], "targetTimestamp": [text.ts], "type": "read"},
                    what="sendReceipt",
                )

    def _attachment(self, file: SignalFile, text: SignalText) -> Attachment:
        """A file of ``text``, fetched (``getAttachment``, base64) only when the media
        intake asks, which is after the allow list."""
        where = {"groupId": group_id(text.group)} if text.group else {"recipient": text.sender}

        async def fetch(limit: int) -> bytes:
            answer = await self._call(
                "getAttachment", {"id": file.id, **where}, what=f"download of {file.name}"
            )
            data = _dict(answer).get("data")
            if not isinstance(data, str):
                raise ChannelError(f"Signal download of {file.name}: no data in the answer")
            if len(data) // 4 * 3 > limit + 2:  # refused before decoding
                raise ValueError(f"{file.name} is larger than {limit} bytes")
            try:
                return base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ChannelError(f"Signal download of {file.name}: not base64") from exc

        kind: Literal["audio"] | None = "audio" if (file.mime or "").startswith("audio/") else None
        return Attachment(file.name, fetch, mime=file.mime, size=file.size, kind=kind)

    async def answering(self, msg: InboundMessage) -> None:
        if self.kept is not None:
            await self.kept.answering(msg)
        if self.signal.typing and msg.chat_id not in self._typing:
            with contextlib.suppress(ChannelError):
                await self._call("sendTyping", _to(msg.chat_id), what="typing")
            self._typing[msg.chat_id] = asyncio.create_task(
                self._keep_typing(msg.chat_id), name=f"signal-typing-{msg.chat_id}"
            )

    async def answered(self, msg: InboundMessage) -> None:
        typing = self._typing.pop(msg.chat_id, None)
        if typing is not None:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            with contextlib.suppress(ChannelError):
                await self._call("sendTyping", {**_to(msg.chat_id), "stop": True}, what="typing")
        if self.kept is not None:
            await self.kept.answered(msg)

    async def _keep_typing(self, chat: str) -> None:
        """Renew the indicator until the turn is answered (which cancels this)."""
        while True:
            await asyncio.sleep(TYPING_EVERY_S)
            try:
                await self._call("sendTyping", _to(chat), what="typing")
            except ChannelError as exc:
                logger.debug("signal: typing in {}: {}", chat, exc)

    # ---- outbound --------------------------------------------------------

    async def send(self, msg: OutboundMessage) -> None:
        problem = chat_problem(msg.chat_id)
        if problem is not None:
            raise ChannelRejected(problem)
        what = f"send to {msg.chat_id}"
        result = await self._call("send", {**_to(msg.chat_id), "message": msg.text}, what=what)
        failure = _send_failure(result, what)
        if failure is not None:
            raise failure


def _to(chat: str) -> dict[str, Any]:
    """The ``send``/``sendTyping`` parameters that address ``chat``."""
    group = group_id(chat)
    return {"groupId": group} if group is not None else {"recipient": [chat]}
