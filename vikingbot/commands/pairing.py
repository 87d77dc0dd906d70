"""Pairing: a stranger gets a one-time code; the owner's approval adds them to ``allow_from``.

Where ``bot.channels.<name>.pairing`` is on, a message from a sender the allow-list
does not know reaches the gateway without its text (nothing of it reaches the
model) and is answered with a short code, and nothing else. The owner approves it
with ``/pair approve CODE`` in their chat or ``vikingbot pair approve CODE``: the
sender is added to that channel's ``allow_from`` in the config file (and to the
running channel at once). Codes expire after ``CODE_TTL``; a sender gets at most
``MAX_CODES_PER_HOUR`` codes an hour (further attempts are audited, not answered);
every step is audited.

The codes live in ``<data>/pairing.json``, written under its lock (``fsutil``), so
the CLI and the gateway share them. :class:`PairingBook` is that file;
:func:`decide_request` is the rule, pure.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from vikingbot.errors import ConfigError
from vikingbot.fsutil import locked_edit

CODE_TTL = timedelta(hours=1)
MAX_CODES_PER_HOUR = 3
MAX_PENDING = 200
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud, typed on a phone
CODE_LEN = 6


@dataclass(frozen=True)
class Request:
    """One stranger's pending code."""

    code: str
    channel: str
    sender_id: str
    chat_id: str
    created_at: str  # ISO 8601, UTC
    expires_at: str


@dataclass
class Book:
    """What ``pairing.json`` holds: pending codes and each sender's recent attempts."""

    requests: list[Request] = field(default_factory=list)
    attempts: dict[str, list[str]] = field(default_factory=dict)  # "channel:sender" -> times


RequestOutcome = Literal["new", "same", "limited", "full"]


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))


def normal_code(text: str) -> str:
    """A code as typed (any case, spaces or dashes) in its stored form."""
    return "".join(ch for ch in str(text)[:40].upper() if ch in ALPHABET)


def _live(book: Book, now: datetime) -> Book:
    """``book`` without expired codes and attempts older than an hour."""
    at = now.isoformat()
    hour_ago = (now - timedelta(hours=1)).isoformat()
    requests = [r for r in book.requests if r.expires_at > at]
    attempts = {k: [t for t in v if t > hour_ago] for k, v in book.attempts.items()}
    return Book(requests, {k: v for k, v in attempts.items() if v})


def decide_request(
    book: Book, channel: str, sender: str, chat: str, now: datetime, code: str
) -> tuple[Book, RequestOutcome, Request | None]:
    """The book after a stranger wrote, what came of it, and their code (pure)."""
    book = _live(book, now)
    who = f"{channel}:{sender}"
    tries = [*book.attempts.get(who, []), now.isoformat()]
    attempts = {**book.attempts, who: tries[-(MAX_CODES_PER_HOUR * 4) :]}
    mine = next((r for r in book.requests if r.channel == channel and r.sender_id == sender), None)
    if len(tries) > MAX_CODES_PER_HOUR:
        return Book(book.requests, attempts), "limited", mine
    if mine is not None:
        return Book(book.requests, attempts), "same", mine
    if len(book.requests) >= MAX_PENDING:
        return Book(book.requests, attempts), "full", None
    made = Request(code, channel, sender, chat, now.isoformat(), (now + CODE_TTL).isoformat())
    return Book([*book.requests, made], attempts), "new", made


def parse_book(text: str) -> Book:
    """``pairing.json``'s text as a :class:`Book`; anything unreadable is an empty book."""
    try:
        raw = json.loads(text) if text.strip() else {}
    except ValueError:
        return Book()
    if not isinstance(raw, dict):
        return Book()
    requests: list[Request] = []
    for r in raw.get("requests", []) if isinstance(raw.get("requests"), list) else []:
        if isinstance(r, dict):
            try:
                requests.append(Request(**{k: str(r[k]) for k in Request.__dataclass_fields__}))
            except KeyError:
                continue
    attempts_raw = raw.get("attempts")
    attempts = {
        str(k): [str(t) for t in v if isinstance(t, str)]
        for k, v in (attempts_raw.items() if isinstance(attempts_raw, dict) else [])
        if isinstance(v, list)
    }
    return Book(requests[:MAX_PENDING], attempts)


def dump_book(book: Book) -> str:
    body = {"requests": [asdict(r) for r in book.requests], "attempts": book.attempts}
    return json.dumps(body, indent=2) + "\n"


class PairingBook:
    """``<data>/pairing.json``: each change is read, decided and written under its lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _change(self, fn: Any) -> Any:
        out: list[Any] = []

        def edit(text: str) -> str:
            book, result = fn(parse_book(text))
            out[:] = [result]
            return dump_book(book)

        self.path.parent.mkdir(parents=True, exist_ok=True)
        locked_edit(self.path, edit, error=ConfigError, mode=0o600)
        return out[0]

    def request(
        self, channel: str, sender: str, chat: str, now: datetime
    ) -> tuple[RequestOutcome, Request | None]:
        code = new_code()

        def fn(book: Book) -> tuple[Book, tuple[RequestOutcome, Request | None]]:
            taken = {r.code for r in book.requests}
            fresh = code if code not in taken else new_code()
            after, outcome, req = decide_request(book, channel, sender, chat, now, fresh)
            return after, (outcome, req)

        result: tuple[RequestOutcome, Request | None] = self._change(fn)
        return result

    def take(self, code: str, now: datetime) -> Request | None:
        """Remove and return the live request with ``code`` (None: unknown or expired)."""
        wanted = normal_code(code)

        def fn(book: Book) -> tuple[Book, Request | None]:
            live = _live(book, now)
            found = next((r for r in live.requests if r.code == wanted), None)
            rest = [r for r in live.requests if r is not found]
            return Book(rest, live.attempts), found

        found: Request | None = self._change(fn)
        return found

    def pending(self, now: datetime) -> list[Request]:
        text = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
        return _live(parse_book(text), now).requests


def add_to_allow_from(config_file: Path, channel: str, sender: str) -> bool:
    """Add ``sender`` to ``bot.channels.<channel>.allowFrom`` in the config file (under its
    lock, every other key kept). False when it was already there."""
    from vikingbot.config.edit import append_value

    return append_value(config_file, f"bot.channels.{channel}.allow_from", sender)
