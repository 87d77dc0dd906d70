"""The files a received mail carries: attachments and inline pictures (pure, total).

A part is a file when it is marked ``attachment``, has a file name, or is an image
with a ``Content-ID`` (a picture inline in an HTML mail). The text parts the mail's
words come from are not files. When only the start of the mail was fetched, the last
part is cut short: it is listed with no bytes (the media intake says so).
"""

from __future__ import annotations

import email.errors
from email.message import Message
from typing import NamedTuple

MAX_FILES = 20
_ERRORS = (
    ValueError,
    LookupError,
    TypeError,
    AttributeError,
    IndexError,
    AssertionError,
    email.errors.MessageError,
)


class MailFile(NamedTuple):
    name: str
    mime: str
    data: bytes | None  # None: the part lies past what was fetched


def mail_files(msg: Message, *, complete: bool) -> tuple[MailFile, ...]:
    """The files of ``msg`` in order (at most ``MAX_FILES``)."""
    try:
        leaves = [p for p in list(msg.walk())[:200] if not p.is_multipart()]
    except _ERRORS:
        return ()
    found: list[MailFile] = []
    for n, part in enumerate(leaves):
        try:
            disposition = part.get_content_disposition()
            name = part.get_filename()
            kind = part.get_content_type()
            inline_image = kind.startswith("image/") and part.get("Content-ID") is not None
            if not (disposition == "attachment" or name or inline_image):
                continue
            payload = part.get_payload(decode=True)
        except _ERRORS:
            continue
        cut = not complete and n == len(leaves) - 1
        data = payload if isinstance(payload, bytes) and not cut else None
        label = str(name)[:200] if name else f"inline-{n + 1}.{kind.split('/')[-1][:10]}"
        found.append(MailFile(label, kind, data))
        if len(found) >= MAX_FILES:
            break
    return tuple(found)
