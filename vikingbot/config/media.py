"""The settings of media in (docs/media.md): ``bot.media`` (caps) and ``bot.transcription``."""

from __future__ import annotations

from pydantic import Field, SecretStr

from vikingbot.config.base import Model

# what OpenAI's /audio/transcriptions takes (Groq and whisper servers take the same)
DEFAULT_AUDIO_FORMATS = ["flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"]


class MediaConfig(Model):
    """``bot.media``: what a file a person sends may be, and what the model is sent."""

    max_file_bytes: int = Field(default=25_000_000, ge=1024)  # any one download
    max_files: int = Field(default=10, ge=1)  # per message
    download_timeout_s: float = Field(default=60, gt=0)
    # an image sent to the model: at most this many pixels, this long a side, these bytes
    image_max_pixels: int = Field(default=1_150_000, ge=10_000)
    image_max_side: int = Field(default=1568, ge=100)
    image_max_bytes: int = Field(default=800_000, ge=20_000)
    # more pixels than this in a file is refused unopened (an "image bomb")
    image_bomb_pixels: int = Field(default=40_000_000, ge=1_000_000)
    # at most this many files downloaded and decoded at once in a gateway (bounds memory)
    parallel_files: int = Field(default=2, ge=1)


class TranscriptionConfig(Model):
    """``bot.transcription``: an OpenAI-compatible ``/audio/transcriptions`` endpoint.

    ``provider`` names a ``bot.providers`` section whose ``api_base`` and ``api_key``
    are used where these are unset; with neither ``provider`` nor ``api_base`` set,
    voice notes are kept in ``inbox/`` and not transcribed.
    """

    provider: str | None = None
    model: str = "whisper-1"
    api_base: str | None = None
    api_key: SecretStr | None = None
    language: str | None = None  # ISO-639-1 hint, e.g. "en"
    timeout_s: float = Field(default=120, gt=0)
    max_seconds: float = Field(default=600, gt=0)  # longer audio is refused
    max_bytes: int = Field(default=25_000_000, ge=1024)  # what the endpoint takes
    formats: list[str] = Field(default_factory=lambda: list(DEFAULT_AUDIO_FORMATS))
