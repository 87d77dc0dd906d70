"""Files in Feishu messages (``image``, ``audio``, ``file``, ``media``): what a message
names (pure, total) and the download through the message-resource API
(``GET /open-apis/im/v1/messages/{message_id}/resources/{key}?type=image|file``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    import lark_oapi as lark

_KEYS = {"image": "image_key", "audio": "file_key", "file": "file_key", "media": "file_key"}


class FeishuFile(NamedTuple):
    key: str
    name: str
    resource: Literal["image", "file"]  # the resource API's ``type``
    kind: Literal["image", "audio"] | None
    duration_s: float | None


def file_ref(message_type: Any, content: Any, message_id: str) -> FeishuFile | None:
    """The file of a message of ``message_type`` with ``content`` JSON, else None (total)."""
    if not isinstance(message_type, str) or message_type not in _KEYS:
        return None
    try:
        data = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None
    key = data.get(_KEYS[message_type]) if isinstance(data, dict) else None
    if not isinstance(key, str) or not key or len(key) > 200:
        return None
    assert isinstance(data, dict)
    name = data.get("file_name")
    duration = data.get("duration")
    seconds = (
        duration / 1000 if isinstance(duration, int) and not isinstance(duration, bool) else None
    )
    if message_type == "image":
        return FeishuFile(key, f"image-{message_id[-12:]}.jpg", "image", "image", None)
    if message_type == "audio":
        return FeishuFile(key, f"voice-{message_id[-12:]}.opus", "file", "audio", seconds)
    label = name[:200] if isinstance(name, str) and name else f"file-{message_id[-12:]}"
    return FeishuFile(key, label, "file", None, None)


async def download(client: lark.Client, message_id: str, ref: FeishuFile) -> tuple[bytes, str]:
    """The file's bytes, or raise ``ValueError`` naming Feishu's refusal (the caller
    converts SDK errors)."""
    from lark_oapi.api.im.v1 import GetMessageResourceRequest

    request = (
        GetMessageResourceRequest.builder()
        .message_id(message_id)
        .file_key(ref.key)
        .type(ref.resource)
        .build()
    )
    response = await client.im.v1.message_resource.aget(request)
    if not response.success() or response.file is None:
        raise ValueError(f"Feishu refused the download: code {response.code}: {response.msg}")
    return response.file.getvalue(), str(response.file_name or "")
