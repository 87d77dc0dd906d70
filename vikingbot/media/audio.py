"""Voice notes: how long they are (ffprobe), the format the endpoint takes (ffmpeg), and
the words in them (an OpenAI-compatible ``/audio/transcriptions`` endpoint)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vikingbot import proc
from vikingbot.errors import SpawnError
from vikingbot.media.types import MediaError

if TYPE_CHECKING:
    from vikingbot.config.media import TranscriptionConfig
    from vikingbot.config.schema import Config

OPENAI_BASE = "https://api.openai.com/v1"
NO_FFMPEG = "ffmpeg is not installed on the bot's machine (install the ffmpeg package)"


def parse_duration(text: str) -> float | None:
    """ffprobe's ``format=duration`` answer as seconds, or None (total: any text)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    try:
        value = float(first[:40])
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None


async def duration(path: Path, environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds of sound in ``path`` by ffprobe; None when ffprobe is absent or cannot tell.
    Raises :class:`MediaError` (``corrupt``) when ffprobe cannot read the file at all."""
    ffprobe = proc.which("ffprobe", environ)
    if ffprobe is None:
        return None
    cmd = [ffprobe, "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)]
    try:
        done = await proc.run(cmd, timeout_s=30, max_output=4096)
    except SpawnError:
        return None
    if done.returncode != 0 and "end of file" in done.stderr_tail(200).lower():
        return 0.0  # the file ends before any sound (a 0 s recording)
    if done.returncode != 0:
        raise MediaError(
            "corrupt", f"{path.name} is not audio I can read ({done.stderr_tail(120)})"
        )
    return parse_duration(done.text)


async def convert(
    path: Path, fmt: str, max_seconds: float, environ: Mapping[str, str] | None = None
) -> bytes:
    """``path`` as mono 16 kHz ``fmt`` (``ogg``: Opus; else ``wav``), cut at ``max_seconds``."""
    ffmpeg = proc.which("ffmpeg", environ)
    if ffmpeg is None:
        raise MediaError("no-ffmpeg", f"I cannot convert {path.name}: {NO_FFMPEG}")
    codec = ["-c:a", "libopus", "-b:a", "32k", "-f", "ogg"] if fmt == "ogg" else ["-f", "wav"]
    cmd = [ffmpeg, "-nostdin", "-v", "error", "-i", str(path), "-t", str(max_seconds), "-vn"]
    cmd += ["-ac", "1", "-ar", "16000", *codec, "pipe:1"]
    try:
        done = await proc.run(cmd, timeout_s=120, max_output=200_000_000)
    except SpawnError as exc:
        raise MediaError("no-ffmpeg", f"I cannot convert {path.name}: {exc}") from exc
    if done.returncode != 0 or not done.stdout:
        why = "timed out" if done.timed_out else (done.stderr_tail(120) or "no output")
        raise MediaError("corrupt", f"{path.name} is not audio I can convert ({why})")
    return done.stdout


def endpoint(config: Config, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(api_base, key)`` of ``bot.transcription``, or None when it is not set up: its own
    ``api_base``/``api_key``, else those of the ``bot.providers`` section it names, else
    OpenAI's with ``OPENAI_API_KEY``."""
    t = config.bot.transcription
    if t.provider is None and t.api_base is None:
        return None
    section = config.bot.providers.get(t.provider or "")
    base = t.api_base or (section.api_base if section else None) or OPENAI_BASE
    secret = t.api_key or (section.api_key if section else None)
    key = secret.get_secret_value() if secret else environ.get("OPENAI_API_KEY", "")
    return base.rstrip("/"), key or "no-key"


async def transcribe(
    data: bytes, filename: str, settings: TranscriptionConfig, base: str, key: str
) -> str:
    """The words in ``data`` (``filename`` names its format) by the endpoint at ``base``.
    Raises :class:`MediaError` (``transcription-failed``) naming the endpoint and why."""
    import openai

    client = openai.AsyncOpenAI(
        api_key=key, base_url=base, timeout=settings.timeout_s, max_retries=1
    )
    try:
        if settings.language:
            resp = await client.audio.transcriptions.create(
                model=settings.model, file=(filename, data), language=settings.language
            )
        else:
            resp = await client.audio.transcriptions.create(
                model=settings.model, file=(filename, data)
            )
    except openai.APIStatusError as exc:
        raise MediaError(
            "transcription-failed",
            f"the transcription endpoint {base} answered {exc.status_code}: "
            f"{str(exc.message)[:160]}",
        ) from exc
    except openai.APIConnectionError as exc:
        raise MediaError(
            "transcription-failed", f"the transcription endpoint {base} is unreachable ({exc})"
        ) from exc
    except (openai.OpenAIError, ValueError, TypeError) as exc:
        raise MediaError(
            "transcription-failed", f"the transcription endpoint {base} failed: {exc}"
        ) from exc
    finally:
        await client.close()
    text = getattr(resp, "text", None)
    if not isinstance(text, str):
        raise MediaError("transcription-failed", f"the transcription endpoint {base} sent no text")
    return " ".join(text.split())[:20_000]
