"""Files in Slack messages (``files`` of a ``file_share`` message): what a message names
(pure, total) and the download of ``url_private_download`` with the bot token.

The token goes only to Slack's file host (``files.slack.com``) or, in tests, the
configured ``api_base``'s host: a file URL anywhere else is refused, never fetched.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit

from vikingbot.bus import Attachment
from vikingbot.errors import ChannelError

SLACK_FILE_HOST = "files.slack.com"


class SlackFile(NamedTuple):
    name: str
    mime: str | None
    size: int | None
    url: str
    voice: bool


def file_refs(event: dict[str, Any]) -> list[SlackFile]:
    """The downloadable files of a message event (at most 20), in order (total)."""
    files = event.get("files")
    out: list[SlackFile] = []
    for f in files[:20] if isinstance(files, list) else []:
        if not isinstance(f, dict):
            continue
        url = f.get("url_private_download") or f.get("url_private")
        name = f.get("name") or f.get("title") or "file"
        if not isinstance(url, str) or not isinstance(name, str):
            continue
        mime, size = f.get("mimetype"), f.get("size")
        out.append(
            SlackFile(
                name=name[:200],
                mime=mime if isinstance(mime, str) else None,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                url=url,
                voice=f.get("subtype") == "slack_audio",
            )
        )
    return out


def host_allowed(url: str, api_base: str | None) -> bool:
    """Whether the bot token may be sent to ``url`` (Slack's file host, or the api_base's)."""
    parts = urlsplit(url)
    hosts = {SLACK_FILE_HOST}
    if api_base:
        hosts.add(urlsplit(api_base).netloc)
    return (
        parts.scheme in ("https", "http")
        and parts.netloc in hosts
        and (parts.scheme == "https" or bool(api_base))
    )


def attachment(ref: SlackFile, token: str, api_base: str | None) -> Attachment:
    """``ref`` as an attachment, fetched (with the bot token) only when taken in."""

    async def fetch(limit: int) -> bytes:
        import httpx

        if not host_allowed(ref.url, api_base):
            raise ValueError(f"its address is not on {SLACK_FILE_HOST}; not fetched")
        headers = {"Authorization": f"Bearer {token}"}
        data = bytearray()
        try:
            async with (
                httpx.AsyncClient(timeout=60) as client,
                client.stream("GET", ref.url, headers=headers) as resp,
            ):
                resp.raise_for_status()
                async for chunk in resp.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        raise ValueError(f"{ref.name} is over the {limit}-byte limit for a file")
        except httpx.HTTPError as exc:
            raise ChannelError(f"Slack file download failed: {exc}") from exc
        return bytes(data)

    kind: Literal["audio"] | None = "audio" if ref.voice else None
    return Attachment(ref.name, fetch, mime=ref.mime, size=ref.size, kind=kind)
