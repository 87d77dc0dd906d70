"""What kind of file a person sent, from its first bytes, name and declared type (pure)."""

from __future__ import annotations

from pathlib import PurePosixPath

from vikingbot.bus.events import AttachmentKind

IMAGE_EXTS = {"jpg", "jpeg", "png", "gif", "webp", "bmp", "tif", "tiff"}
AUDIO_EXTS = {"ogg", "oga", "opus", "mp3", "m4a", "wav", "webm", "flac", "aac", "amr", "mpga"}
DOCUMENT_EXTS = {
    "pdf", "txt", "md", "markdown", "csv", "tsv", "json", "rtf",
    "docx", "xlsx", "pptx", "odt", "ods", "odp", "doc", "xls", "ppt",
}  # fmt: skip

_MAGIC: list[tuple[bytes, int, AttachmentKind, str]] = [
    (b"\xff\xd8\xff", 0, "image", "jpg"),
    (b"\x89PNG\r\n\x1a\n", 0, "image", "png"),
    (b"GIF87a", 0, "image", "gif"),
    (b"GIF89a", 0, "image", "gif"),
    (b"WEBP", 8, "image", "webp"),
    (b"BM", 0, "image", "bmp"),
    (b"OggS", 0, "audio", "ogg"),
    (b"WAVE", 8, "audio", "wav"),
    (b"fLaC", 0, "audio", "flac"),
    (b"ID3", 0, "audio", "mp3"),
    (b"#!AMR", 0, "audio", "amr"),
    (b"\x1a\x45\xdf\xa3", 0, "audio", "webm"),
    (b"%PDF-", 0, "document", "pdf"),
]


def extension(name: str) -> str:
    """The lower-case extension of ``name`` without the dot ("" when none)."""
    suffix = PurePosixPath(name.replace("\\", "/")).suffix
    return suffix[1:].lower() if len(suffix) <= 10 else ""


def kind_of(
    name: str, mime: str | None, head: bytes, declared: AttachmentKind | None = None
) -> tuple[AttachmentKind, str] | None:
    """``(kind, extension)`` of a file, or None when it is no type we take.

    The bytes decide where they are known (a ``.jpg`` that is a PDF is a PDF);
    then the platform's word, the extension and the declared MIME type.
    """
    for magic, at, kind, ext in _MAGIC:
        if head[at : at + len(magic)] == magic:
            if kind == "image" and ext == "bmp" and extension(name) != "bmp":
                continue  # "BM" starts too many things to trust alone
            return kind, ext
    if head[4:8] == b"ftyp":  # ISO media: m4a/mp4 audio, or HEIC photos (not taken)
        brand = head[8:12]
        if brand in (b"M4A ", b"M4B ", b"mp42", b"isom", b"dash", b"mp41"):
            return "audio", "m4a"
        return None
    ext = extension(name)
    mime = (mime or "").split(";")[0].strip().lower()
    if ext in DOCUMENT_EXTS and ext != "pdf":
        return "document", ext
    if declared == "audio" or mime.startswith("audio/") or ext in AUDIO_EXTS:
        return ("audio", ext or "ogg") if head else None
    if mime in ("text/plain", "text/markdown", "text/csv") and _texty(head):
        return "document", {"text/markdown": "md", "text/csv": "csv"}.get(mime, "txt")
    return None


def _texty(head: bytes) -> bool:
    """UTF-8 text with no NUL (a truncated last character allowed)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3
    return True
