"""Mail addresses and subjects: checked before they reach a header (pure).

Everything that ends up in a header of a mail we send (the recipient, the sender,
the subject) passes here, so no CR, LF or other control character, no second
address and no display-name trickery can add a header or a recipient.
"""

from __future__ import annotations

import re

from vikingbot.errors import ChannelRejected

MAX_ADDRESS_CHARS = 254
MAX_SUBJECT_CHARS = 140

# One addr-spec, dot-atom only (no quoted local parts, no comments, no display name).
# Each part is one character class that cannot overlap its separator: linear time.
_LOCAL = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
_ADDRESS = re.compile(rf"({_LOCAL})@({_DOMAIN})")


def check_address(text: str, what: str = "address") -> str:
    """``text`` as a plain address (``name@example.org``), lower-cased domain; or
    :class:`ChannelRejected` naming what is wrong with it."""
    if not isinstance(text, str):
        raise ChannelRejected(f"{what} must be text, got {type(text).__name__}")
    if len(text) > MAX_ADDRESS_CHARS:
        raise ChannelRejected(f"{what} is longer than {MAX_ADDRESS_CHARS} characters")
    for ch in text:
        if ch in "\r\n" or not ch.isprintable():
            raise ChannelRejected(f"{what} {text!r} contains a control character")
    found = _ADDRESS.fullmatch(text.strip())
    if found is None or len(found.group(1)) > 64:
        raise ChannelRejected(f"{what} {text!r} is not a plain address like name@example.org")
    return f"{found.group(1)}@{found.group(2).lower()}"


def same_address(a: str, b: str) -> bool:
    """Whether two addresses name one mailbox (compared case-insensitively, as users expect)."""
    return a.strip().casefold() == b.strip().casefold()


def clean_subject(text: str) -> str:
    """A subject safe for a header: control characters (CR, LF, tabs...) become spaces,
    runs of space one, at most ``MAX_SUBJECT_CHARS`` characters. Never raises."""
    out: list[str] = []
    for ch in str(text)[: MAX_SUBJECT_CHARS * 4]:
        ch = ch if ch.isprintable() else " "
        if ch == " " and (not out or out[-1] == " "):
            continue
        out.append(ch)
    subject = "".join(out).strip()
    if len(subject) > MAX_SUBJECT_CHARS:
        subject = subject[: MAX_SUBJECT_CHARS - 1].rstrip() + "…"
    return subject


def subject_for(text: str, prefix: str) -> str:
    """The subject of a mail that starts no thread: ``prefix`` and the text's first line
    (Markdown heading marks and emphasis dropped)."""
    first = ""
    for line in text.splitlines():
        line = line.strip().lstrip("#>*-_ ").strip("*_` ")
        if line:
            first = line
            break
    joined = f"{prefix}: {first}" if prefix and first else (prefix or first or "(no subject)")
    return clean_subject(joined)
