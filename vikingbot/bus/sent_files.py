"""Files sent inside a JSON body, base64-encoded: one grammar for the control API's chat
(``vikingbot chat --attach`` attached to a gateway) and the webhook channel's inbound
POST (docs/media.md, "Files in a JSON body").

``"files": [{"name": "photo.jpg", "type": "image/jpeg", "data": "<base64>"}, ...]``:
``name`` is required (at most 200 characters), ``type`` optional (a MIME type, at most
100), ``data`` standard base64 (padding required, no line breaks). The route's body cap
bounds the total; each file's own cap (``bot.media.max_file_bytes``) is the intake's.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from vikingbot.bus.events import Attachment

FILES_LIMIT = 48 * 1024 * 1024  # the body cap of a route that takes a message with files
MAX_SENT_FILES = 10
MAX_NAME = 200
MAX_TYPE = 100


class SentFilesError(ValueError):
    """The ``files`` field is malformed; ``str()`` names the entry and what is wrong."""


@dataclass(frozen=True)
class SentFile:
    """One decoded file of a JSON body."""

    name: str
    data: bytes = field(repr=False)
    mime: str | None = None

    def attachment(self) -> Attachment:
        """The file as an ``Attachment``: its bytes are already here, ``fetch`` hands
        them over (the intake checks them against its cap)."""
        data = self.data

        async def fetch(limit: int) -> bytes:
            return data[: limit + 1]

        return Attachment(self.name, fetch, mime=self.mime, size=len(data))


def _text(entry: dict[str, Any], key: str, where: str, limit: int, required: bool) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise SentFilesError(f"{where}: {key!r} must be a non-empty string")
    if len(value) > limit:
        raise SentFilesError(f"{where}: {key!r} is over {limit} characters")
    return value


def parse_sent_files(value: Any, *, field_name: str = "files") -> list[SentFile]:
    """The decoded files of a body's ``files`` value (None: no files). Raises
    :class:`SentFilesError` naming the entry; total and linear in the input's size."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SentFilesError(f"{field_name!r} must be a list of objects")
    if len(value) > MAX_SENT_FILES:
        raise SentFilesError(
            f"{field_name!r} has {len(value)} files; at most {MAX_SENT_FILES} per message"
        )
    out: list[SentFile] = []
    for n, entry in enumerate(value):
        where = f"{field_name}[{n}]"
        if not isinstance(entry, dict):
            raise SentFilesError(f"{where} must be an object with name, type and data")
        name = _text(entry, "name", where, MAX_NAME, True)
        mime = _text(entry, "type", where, MAX_TYPE, False)
        raw = entry.get("data")
        if not isinstance(raw, str):
            raise SentFilesError(f"{where}: 'data' must be a base64 string")
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise SentFilesError(f"{where}: 'data' is not valid base64") from None
        assert name is not None
        out.append(SentFile(name, data, mime))
    return out


def encode_file(name: str, data: bytes, mime: str | None = None) -> dict[str, str]:
    """One entry of ``files`` (what ``vikingbot chat --attach`` sends)."""
    entry = {"name": name, "data": base64.b64encode(data).decode("ascii")}
    if mime:
        entry["type"] = mime
    return entry
