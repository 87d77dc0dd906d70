"""Files in Matrix messages (``m.image``, ``m.audio``, ``m.file``): what a message names
(pure, total) and the download through the authenticated media API
(``GET /_matrix/client/v1/media/download/{server}/{media}``, the access token as bearer;
current Synapse answers 404 on the legacy ``/_matrix/media/v3`` path)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from mautrix.client.api import ClientAPI

MEDIA_TYPES = {"m.image": "image", "m.audio": "audio", "m.file": None}
_MXC = re.compile(r"mxc://([A-Za-z0-9.\-:\[\]]{1,255})/([A-Za-z0-9_\-]{1,255})")


class MediaRef(NamedTuple):
    """A file a Matrix message carries (unencrypted ``url``)."""

    server: str
    media_id: str
    name: str
    mime: str | None
    size: int | None
    kind: Literal["image", "audio"] | None
    caption: str


def media_ref(content: dict[str, Any]) -> MediaRef | None:
    """The file of an ``m.image``/``m.audio``/``m.file`` content, else None (total).
    With ``filename`` set, ``body`` is a caption (spec v1.10); else it is the name."""
    msgtype = content.get("msgtype")
    url, body = content.get("url"), content.get("body")
    if not isinstance(msgtype, str) or msgtype not in MEDIA_TYPES:
        return None
    if not isinstance(url, str) or not isinstance(body, str):
        return None
    found = _MXC.fullmatch(url)
    if found is None:
        return None
    info = content.get("info") if isinstance(content.get("info"), dict) else {}
    assert isinstance(info, dict)
    mime, size = info.get("mimetype"), info.get("size")
    filename = content.get("filename")
    caption = ""
    if isinstance(filename, str) and filename and filename != body:
        name, caption = filename, body
    else:
        name = body
    return MediaRef(
        server=found.group(1),
        media_id=found.group(2),
        name=name[:200] or "file",
        mime=mime if isinstance(mime, str) else None,
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        kind=MEDIA_TYPES[msgtype],  # type: ignore[index,arg-type]
        caption=caption,
    )


async def download(api: ClientAPI, homeserver: str, ref: MediaRef, limit: int) -> bytes:
    """The file's bytes from the authenticated media API; ``ValueError`` past ``limit``
    bytes, ``aiohttp.ClientResponseError`` for an HTTP error (the caller converts)."""
    url = f"{homeserver.rstrip('/')}/_matrix/client/v1/media/download/{ref.server}/{ref.media_id}"
    headers = {"Authorization": f"Bearer {api.api.token}"}
    params = {"allow_redirect": "true"}
    async with api.api.session.get(url, headers=headers, params=params) as resp:
        resp.raise_for_status()
        data = bytearray()
        async for chunk in resp.content.iter_chunked(65536):
            data += chunk
            if len(data) > limit:
                raise ValueError(f"{ref.name} is over the {limit}-byte limit for a file")
        return bytes(data)
