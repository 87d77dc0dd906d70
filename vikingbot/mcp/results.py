"""A tool result as the model reads it: text, capped (pure).

Text blocks are kept; images, audio, blobs and resource links become one-line
placeholders (kind, type, size, URI); an embedded text resource is kept as text.
Structured content is shown as JSON when no text block says the same. A server
can return anything, so everything is capped at ``limit`` characters while it is
assembled, never after a 50 MB string was built.
"""

from __future__ import annotations

import json
from typing import Any

MAX_RESULT_CHARS = 100_000


def _placeholder(block: Any) -> str | None:
    kind = getattr(block, "type", None)
    if kind == "text":
        return None
    if kind in ("image", "audio"):
        data = getattr(block, "data", "") or ""
        return f"[{kind}: {getattr(block, 'mime_type', '?')}, about {len(data) * 3 // 4} bytes]"
    if kind == "resource_link":
        return f"[resource link: {_short(getattr(block, 'uri', ''))} {getattr(block, 'name', '')}]"
    if kind == "resource":
        res = getattr(block, "resource", None)
        if getattr(res, "text", None) is None:
            blob = getattr(res, "blob", "") or ""
            mime = getattr(res, "mime_type", None) or "?"
            uri = _short(getattr(res, "uri", ""))
            return f"[resource: {uri}, {mime}, about {len(blob) * 3 // 4} bytes]"
        return None
    return f"[{_short(str(kind))} content]"


def _short(text: Any, limit: int = 300) -> str:
    s = str(text)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _text_of(block: Any) -> str:
    if getattr(block, "type", None) == "resource":
        return str(getattr(block.resource, "text", "") or "")
    return str(getattr(block, "text", "") or "")


def render(content: list[Any], structured: Any = None, *, limit: int = MAX_RESULT_CHARS) -> str:
    """The result's blocks as text for the model, at most ``limit`` characters plus a note."""
    parts: list[str] = []
    used = 0
    cut = False
    for block in content:
        piece = _placeholder(block)
        if piece is None:
            piece = _text_of(block)
        room = limit - used
        if len(piece) > room:
            parts.append(piece[:room])
            cut = True
            break
        parts.append(piece)
        used += len(piece) + 1
    if not cut and structured is not None and not any(p.strip() for p in parts):
        text = json.dumps(structured, ensure_ascii=False, default=str)
        if len(text) > limit:
            text, cut = text[:limit], True
        parts.append(text)
    out = "\n".join(parts)
    if cut:
        out += f"\n[... result truncated at {limit} characters]"
    return out or "(the tool returned nothing)"
