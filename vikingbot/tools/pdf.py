"""A PDF's text for ``read_file`` (pypdf): page by page, bounded, nothing run or fetched.

pypdf reads the file's text streams only: no script in it runs, no link or embedded
file is followed or unpacked. A damaged or encrypted PDF is a :class:`ToolError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from vikingbot.agentio import open_regular
from vikingbot.errors import ToolError

MAX_PDF_BYTES = 50_000_000
MAX_PAGES = 500
MAX_TEXT_CHARS = 2_000_000


def pdf_text(path: Path, label: str) -> str:
    """The text of the PDF at ``path``, each page under a ``--- page N ---`` line."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    fd = open_regular(path, label)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_PDF_BYTES:
            raise ToolError(f"{label} is {size} bytes, over the {MAX_PDF_BYTES}-byte PDF limit")
        try:
            reader = PdfReader(fh)
            if reader.is_encrypted:
                raise ToolError(f"{label} is an encrypted PDF; I cannot read its text")
            parts: list[str] = []
            chars = 0
            for n, page in enumerate(reader.pages, start=1):
                if n > MAX_PAGES or chars > MAX_TEXT_CHARS:
                    parts.append(f"[... the PDF goes on; read stopped at page {n - 1}]\n")
                    break
                text = page.extract_text() or ""
                parts.append(f"--- page {n} ---\n{text.rstrip()}\n")
                chars += len(text)
        except ToolError:
            raise
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
            why = f"{type(exc).__name__}: {exc}"[:200]
            raise ToolError(f"{label} is not a PDF I can read ({why})") from exc
    return "".join(parts)


def lines_of(text: str, label: str, offset: int, limit: int | None, max_chars: int) -> str:
    """Lines ``offset``.. of ``text`` (1-based), at most ``max_chars`` characters."""
    lines = text.splitlines(keepends=True)
    end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
    out = "".join(lines[offset - 1 : end])
    if len(out) > max_chars:
        return out[:max_chars] + f"\n[... truncated at {max_chars} characters; use offset/limit]"
    if end < len(lines):
        return out + f"\n[... {len(lines) - end} more lines; read on with offset={end + 1}]"
    return out
