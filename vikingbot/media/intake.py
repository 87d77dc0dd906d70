"""Taking in the files of one message: download under the caps, keep the original in
``inbox/``, then an image for the model, a voice note's words, or a document's name.

A file that cannot be taken in is one line to the person (the :class:`MediaError`'s
text), an audit record (``media.refuse``), and the rest of the message goes on.
Called only for a message whose sender passed the channel's allow list (the channel's
``accept``), so nothing a stranger sends is ever downloaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.media import audio, images
from vikingbot.media.inbox import keep
from vikingbot.media.sniff import extension, kind_of
from vikingbot.media.types import MediaError, Taken
from vikingbot.media.vision import sees_images

if TYPE_CHECKING:
    from vikingbot.bus.events import Attachment
    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config
    from vikingbot.store.db import StateStore

TAKEN_KINDS = "images, voice notes and audio, PDF, text, Markdown, CSV and office files"


def size_text(n: int) -> str:
    """``512 B``, ``12.3 KB``, ``4.5 MB``."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1_000_000:.1f} MB"


def blind_notice(model: str) -> str:
    return (
        f"The model here ({model or 'not named'}) does not see images: I kept your picture "
        "in the workspace and answer from your words (set bot.agents.vision: on if it does)."
    )


class MediaIntake:
    """Takes in the files of chat messages for one gateway or chat run."""

    def __init__(
        self,
        config: Callable[[], Config],
        *,
        clock: Clock,
        store: StateStore | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.environ: Mapping[str, str] = environ if environ is not None else {}
        self._slots = asyncio.Semaphore(config().bot.media.parallel_files)
        self._told_blind: set[str] = set()  # chats told once that the model does not see

    async def take(
        self,
        attachments: Sequence[Attachment],
        *,
        workspace: Path,
        chat: str,
        sender: str,
        source: str,
    ) -> Taken:
        """Take in ``attachments`` sent by ``sender`` in ``chat`` (a session key) through
        ``source`` (the channel's name, for the words and the audit)."""
        taken = Taken()
        cap = self.config().bot.media.max_files
        for n, att in enumerate(attachments):
            if n >= cap:
                self._refuse(
                    taken,
                    MediaError("too-many", f"I take {cap} files per message; the rest were left"),
                    sender=sender,
                    source=source,
                    name=att.name,
                )
                break
            try:
                async with self._slots:
                    await self._one(att, taken, workspace=workspace, chat=chat, source=source)
            except MediaError as exc:
                self._refuse(taken, exc, sender=sender, source=source, name=att.name)
        return taken

    def _refuse(
        self, taken: Taken, exc: MediaError, *, sender: str, source: str, name: str
    ) -> None:
        taken.notices.append(str(exc))
        taken.refused.append(exc.reason)
        logger.info("media from {} on {}: {} ({})", sender, source, exc, exc.reason)
        if self.store is None:
            return
        try:
            self.store.audit(
                f"channel:{source}",
                "media.refuse",
                sender,
                "refused",
                reason=exc.reason,
                details={"file": name[:200], "message": str(exc)[:300]},
            )
        except VikingbotError:
            logger.exception("media: could not write the audit record")

    async def _download(self, att: Attachment, source: str) -> bytes:
        media = self.config().bot.media
        cap = media.max_file_bytes
        if att.size is not None and att.size > cap:
            raise MediaError(
                "too-big",
                f"{att.name} is {size_text(att.size)}, over the {size_text(cap)} limit for a file",
            )
        try:
            data = await asyncio.wait_for(att.fetch(cap), media.download_timeout_s)
        except MediaError:
            raise
        except TimeoutError as exc:
            raise MediaError(
                "download-failed",
                f"I could not download {att.name} from {source}: no answer within "
                f"{media.download_timeout_s:g}s",
            ) from exc
        except (VikingbotError, OSError, ValueError) as exc:
            why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise MediaError(
                "download-failed", f"I could not download {att.name} from {source}: {why}"
            ) from exc
        if len(data) > cap:
            raise MediaError(
                "too-big",
                f"{att.name} is over the {size_text(cap)} limit for a file",
            )
        return data

    async def _one(
        self, att: Attachment, taken: Taken, *, workspace: Path, chat: str, source: str
    ) -> None:
        data = await self._download(att, source)
        found = kind_of(att.name, att.mime, data[:64], att.kind)
        if found is None:
            ext = extension(att.name)
            what = f"a .{ext} file" if ext else "this type of file"
            raise MediaError(
                "unsupported", f"I cannot take {what} ({att.name}): I take {TAKEN_KINDS}"
            )
        kind, ext = found
        try:
            path = await asyncio.to_thread(keep, workspace, att.name, ext, data, self.clock.now())
        except OSError as exc:
            why = exc.strerror or str(exc)
            said = f"I could not save {att.name} in the workspace: {why}"
            raise MediaError("not-kept", said) from exc
        rel = path.relative_to(workspace).as_posix()
        size = size_text(len(data))
        if kind == "document":
            taken.lines.append(f"[file received: {rel} ({size}); read it with read_file]")
        elif kind == "image":
            await self._image(data, att.name, rel, size, taken, chat)
        else:
            await self._audio(path, att, ext, rel, taken)

    async def _image(
        self, data: bytes, name: str, rel: str, size: str, taken: Taken, chat: str
    ) -> None:
        config = self.config()
        if not sees_images(config):
            taken.lines.append(f"[image received: {rel} ({size}); this model does not see it]")
            if chat not in self._told_blind:
                self._told_blind.add(chat)
                taken.notices.append(blind_notice(config.bot.agents.model or ""))
            return
        m = config.bot.media
        part = await asyncio.to_thread(
            partial(
                images.prepare,
                data,
                name=name,
                max_pixels=m.image_max_pixels,
                max_side=m.image_max_side,
                max_bytes=m.image_max_bytes,
                bomb_pixels=m.image_bomb_pixels,
            )
        )
        taken.images.append(part)
        taken.lines.append(f"[image received: {rel} ({size}); shown to you with this message]")

    async def _audio(self, path: Path, att: Attachment, ext: str, rel: str, taken: Taken) -> None:
        config = self.config()
        t = config.bot.transcription
        kept = f"; the audio is kept as {rel}"
        try:
            seconds = await audio.duration(path, self.environ)
            seconds = att.duration_s if seconds is None else seconds
            if seconds is not None and seconds < 0.1:
                raise MediaError("empty-audio", f"{att.name} has no sound in it (0 seconds)")
            if seconds is not None and seconds > t.max_seconds:
                raise MediaError(
                    "too-long",
                    f"{att.name} is {seconds / 60:.0f} minutes long; I transcribe up to "
                    f"{t.max_seconds / 60:.0f} minutes",
                )
            where = audio.endpoint(config, self.environ)
            if where is None:
                raise MediaError(
                    "no-transcription",
                    "Voice notes are not set up here (bot.transcription, see docs/media.md)",
                )
            data = path.read_bytes()
            if ext not in t.formats or len(data) > t.max_bytes:
                fmt = "ogg" if "ogg" in t.formats else "wav"
                data = await audio.convert(path, fmt, t.max_seconds, self.environ)
                ext = fmt
            words = await audio.transcribe(data, f"voice.{ext}", t, *where)
        except MediaError as exc:
            raise MediaError(exc.reason, f"{exc}{kept}") from exc
        if not words:
            raise MediaError("empty-audio", f"I heard no words in {att.name}{kept}")
        taken.transcript = words if taken.transcript is None else f"{taken.transcript} {words}"
        shown = words if len(words) <= 300 else words[:299] + "…"
        taken.notices.append(f'🎙 I heard: "{shown}"')
        taken.lines.append(f"[voice note received: {rel}]")
