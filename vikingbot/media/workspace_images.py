"""Pictures a heartbeat entry names in its own workspace, shown to the model with its turn.

Unattended turns stay text-only unless an entry names a picture in its workspace: a
word of the entry's text that is a relative path ending in an image extension
(``inbox/20261206-203012-board.jpg``, in backticks or quotes or not). The path must
stay inside the workspace once resolved (no ``..`` out, no absolute path, no symlink
leading out), be a file under ``bot.media.max_file_bytes``, and decode as an image;
anything else is one line in the prompt saying why it is not shown (docs/media.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from vikingbot.media import images
from vikingbot.media.types import MediaError
from vikingbot.media.vision import sees_images
from vikingbot.providers.base import ImagePart

if TYPE_CHECKING:
    from vikingbot.config.schema import Config

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff")
MAX_NAMED = 4  # pictures one entry may show
_TRIM = "`'\"()[]<>{},;:!?*"


def named_images(text: str) -> list[str]:
    """The relative image paths ``text`` names, in order, each once (pure, linear)."""
    found: list[str] = []
    for word in text.split():
        word = word.strip(_TRIM).rstrip(".").strip(_TRIM)  # `a.png`. and 'a.png'.
        if word.lower().endswith(IMAGE_SUFFIXES) and "://" not in word and word not in found:
            found.append(word)
    return found


class Shown(NamedTuple):
    """The pictures an entry shows, and a line for each picture it names."""

    images: list[ImagePart]
    lines: list[str]


def inside(workspace: Path, name: str) -> Path | None:
    """``name`` resolved under ``workspace``; None when it is absolute or leads out."""
    if name.startswith(("/", "~", "\\")) or (len(name) > 1 and name[1] == ":"):
        return None
    root = workspace.resolve()
    path = (root / name).resolve()
    return path if path.is_relative_to(root) else None


def _load(workspace: Path, text: str, config: Config) -> Shown:
    shown = Shown([], [])
    m = config.bot.media
    for name in named_images(text)[:MAX_NAMED]:
        path = inside(workspace, name)
        if path is None:
            shown.lines.append(f"[{name}: not shown, it is outside this workspace]")
            continue
        try:
            size = path.stat().st_size if path.is_file() else None
            if size is None:
                shown.lines.append(f"[{name}: not shown, no such file in this workspace]")
                continue
            if size > m.max_file_bytes:
                shown.lines.append(f"[{name}: not shown, over bot.media.max_file_bytes]")
                continue
            data = path.read_bytes()
        except OSError as exc:
            shown.lines.append(f"[{name}: not shown, {exc.strerror or exc}]")
            continue
        try:
            part = images.prepare(
                data,
                name=name,
                max_pixels=m.image_max_pixels,
                max_side=m.image_max_side,
                max_bytes=m.image_max_bytes,
                bomb_pixels=m.image_bomb_pixels,
            )
        except MediaError as exc:
            shown.lines.append(f"[{name}: not shown, {exc}]")
            continue
        shown.images.append(part)
        shown.lines.append(f"[image {name} is shown to you with this message]")
    return shown


async def workspace_images(config: Callable[[], Config], workspace: Path, text: str) -> Shown:
    """The pictures ``text`` names inside ``workspace``, ready for the model; nothing
    when the model does not see images or the text names none."""
    settings = config()
    if not named_images(text):
        return Shown([], [])
    if not sees_images(settings):
        blind = "[the pictures this entry names are not shown: the model does not see images]"
        return Shown([], [blind])
    return await asyncio.to_thread(partial(_load, workspace, text, settings))
