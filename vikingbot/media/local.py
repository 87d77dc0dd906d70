"""A file on this machine as an ``Attachment`` (``vikingbot chat --attach FILE``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from vikingbot.bus.events import Attachment


def _read(path: Path, limit: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit + 1)  # one byte past the cap tells "too big" without reading all


def file_attachment(path: Path) -> Attachment:
    """``path`` as an attachment: its name, size, and a read of at most the cap."""

    async def fetch(limit: int) -> bytes:
        return await asyncio.to_thread(_read, path, limit)

    return Attachment(path.name, fetch, size=path.stat().st_size)
