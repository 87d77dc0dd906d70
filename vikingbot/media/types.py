"""What taking in a file produces, and the one vocabulary of why one was refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vikingbot.errors import VikingbotError
from vikingbot.providers.base import ImagePart

Refusal = Literal[
    "too-many",  # more files in one message than bot.media.max_files
    "too-big",  # over bot.media.max_file_bytes (declared or downloaded)
    "download-failed",  # the platform's download failed or timed out
    "unsupported",  # not an image, audio or a document type we take
    "corrupt",  # an image or audio file that does not decode
    "bomb",  # more pixels than bot.media.image_bomb_pixels
    "empty-audio",  # 0 seconds of sound
    "too-long",  # audio over bot.transcription.max_seconds
    "no-transcription",  # bot.transcription is not set up
    "no-ffmpeg",  # the endpoint needs another format and ffmpeg is not installed
    "transcription-failed",  # the endpoint refused or failed
    "not-kept",  # the workspace's inbox/ could not be written (disk full, permissions)
]


class MediaError(VikingbotError):
    """A file a person sent cannot be taken in; ``str()`` is the line they are told."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason: Refusal = reason


@dataclass
class Taken:
    """A message's files, taken in: what the turn is told and shown.

    ``lines`` go after the person's text (where each file was saved); ``images``
    go to a model that sees; ``transcript`` is a voice note's words (the message);
    ``notices`` are one line each for the person (a refusal, what was heard).
    """

    lines: list[str] = field(default_factory=list)
    images: list[ImagePart] = field(default_factory=list)
    transcript: str | None = None
    notices: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def prompt(self, text: str) -> str:
        """The turn's prompt: the person's text (or the transcript), then the file lines."""
        head = text.strip()
        if self.transcript is not None:
            spoken = f"[voice note, transcribed] {self.transcript}"
            head = f"{head}\n{spoken}" if head else spoken
        return "\n".join(p for p in [head, *self.lines] if p)
