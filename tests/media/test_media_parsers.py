"""The pure parts: what a file is, its safe dated name, a Matrix message's file, ffprobe's
answer, the vision list. Total on any input (hypothesis)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.channels.feishu_files import file_ref
from vikingbot.channels.matrix_media import media_ref
from vikingbot.channels.slack_files import file_refs, host_allowed
from vikingbot.config.schema import Config
from vikingbot.media.audio import parse_duration
from vikingbot.media.inbox import dated_name, keep, safe_name
from vikingbot.media.sniff import kind_of
from vikingbot.media.vision import sees_images

WHEN = datetime(2026, 12, 6, 20, 30, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "mime", "head", "want"),
    [
        ("a.jpg", None, b"\xff\xd8\xff\xe0", ("image", "jpg")),
        ("photo", None, b"\x89PNG\r\n\x1a\n", ("image", "png")),
        ("x.jpg", "image/jpeg", b"%PDF-1.7", ("document", "pdf")),  # the bytes decide
        ("v", None, b"OggS\x00", ("audio", "ogg")),
        ("n.m4a", None, b"\x00\x00\x00\x20ftypM4A ", ("audio", "m4a")),
        ("IMG.heic", None, b"\x00\x00\x00\x18ftypheic", None),  # HEIC: not taken
        ("notes.md", None, b"# hi", ("document", "md")),
        ("data.csv", "text/csv", b"a,b", ("document", "csv")),
        ("r.docx", None, b"PK\x03\x04", ("document", "docx")),
        ("paste", "text/plain", "héllo".encode(), ("document", "txt")),
        ("setup.exe", None, b"MZ\x90\x00", None),
        ("blob", "application/octet-stream", b"\x00\x01", None),
    ],
)
def test_kind_of(name: str, mime: str | None, head: bytes, want: Any) -> None:
    assert kind_of(name, mime, head) == want


@given(st.text(max_size=300), st.none() | st.text(max_size=100), st.binary(max_size=64))
def test_kind_of_is_total(name: str, mime: str | None, head: bytes) -> None:
    found = kind_of(name, mime, head)
    assert found is None or found[0] in ("image", "audio", "document")


def test_names_are_dated_plain_and_never_overwrite(tmp_path: Path) -> None:
    assert dated_name("My Photo (1).JPG", "jpg", WHEN) == "20261206-203012-My-Photo-1.jpg"
    assert safe_name("../../etc/passwd", "txt") == "passwd.txt"
    assert safe_name(".hidden", "md") == "hidden.md"
    first = keep(tmp_path, "a.txt", "txt", b"one", WHEN)
    second = keep(tmp_path, "a.txt", "txt", b"two", WHEN)
    assert (first.name, second.name) == ("20261206-203012-a.txt", "20261206-203012-a-1.txt")
    assert first.read_bytes() == b"one" and second.read_bytes() == b"two"
    assert sorted(p.name for p in (tmp_path / "inbox").iterdir()) == sorted(
        [first.name, second.name]
    )


@given(st.text(max_size=300), st.text(max_size=20))
def test_safe_name_is_total_and_safe(name: str, ext: str) -> None:
    out = safe_name(name, ext)
    assert out and "/" not in out and not out.startswith(".") and len(out) <= 72


def test_media_ref_reads_image_audio_and_file_contents() -> None:
    ref = media_ref(
        {"msgtype": "m.image", "body": "look", "filename": "a.png", "url": "mxc://hs.test/AbC_1",
         "info": {"mimetype": "image/png", "size": 12}}
    )  # fmt: skip
    assert ref is not None
    assert (ref.server, ref.media_id, ref.name, ref.caption, ref.kind, ref.size) == (
        "hs.test", "AbC_1", "a.png", "look", "image", 12,
    )  # fmt: skip
    assert media_ref({"msgtype": "m.file", "body": "r.pdf", "url": "mxc://h/x"}).kind is None  # type: ignore[union-attr]
    assert media_ref({"msgtype": "m.image", "body": "x", "url": "https://evil/x"}) is None
    assert media_ref({"msgtype": "m.image", "body": "x", "url": "mxc://h/../../x"}) is None
    assert media_ref({"msgtype": "m.text", "body": "x", "url": "mxc://h/x"}) is None


@given(st.dictionaries(st.sampled_from(["msgtype", "body", "url", "info", "filename"]),
                       st.none() | st.text(max_size=50) | st.integers() | st.dictionaries(
                           st.text(max_size=10), st.integers() | st.text(max_size=10))))  # fmt: skip
def test_media_ref_is_total(content: dict[str, Any]) -> None:
    media_ref(content)


@pytest.mark.parametrize(
    ("text", "want"),
    [("2.480000\n", 2.48), ("N/A\n", None), ("", None), ("-1", None), ("inf", None), ("nan", None)],
)
def test_parse_duration(text: str, want: float | None) -> None:
    assert parse_duration(text) == want


@pytest.mark.parametrize(
    ("model", "vision", "want"),
    [
        ("gpt-4o-mini", "auto", True),
        ("claude-sonnet-4-9", "auto", True),
        ("llava:13b", "auto", True),
        ("qwen2.5-vl-7b", "auto", True),
        ("deepseek-chat", "auto", False),
        ("gpt-3.5-turbo", "auto", False),
        ("deepseek-chat", "on", True),
        ("gpt-4o", "off", False),
    ],
)
def test_sees_images(model: str, vision: str, want: bool) -> None:
    cfg = Config.model_validate({"bot": {"agents": {"model": model, "vision": vision}}})
    assert sees_images(cfg) is want


@given(
    st.dictionaries(
        st.sampled_from(["files", "text"]),
        st.none() | st.text(max_size=20) | st.lists(
            st.none() | st.integers() | st.dictionaries(
                st.sampled_from(["name", "url_private", "url_private_download", "size",
                                 "mimetype", "subtype", "title"]),
                st.none() | st.integers() | st.text(max_size=30) | st.booleans()),
            max_size=25),
    )
)  # fmt: skip
def test_slack_file_refs_is_total(event: dict[str, Any]) -> None:
    refs = file_refs(event)
    assert len(refs) <= 20 and all(isinstance(r.url, str) for r in refs)


@pytest.mark.parametrize(
    ("url", "api_base", "ok"),
    [
        ("https://files.slack.com/files-pri/T1-F1/a.jpg", None, True),
        ("http://files.slack.com/files-pri/T1-F1/a.jpg", None, False),
        ("https://files.slack.com.evil.test/a.jpg", None, False),
        ("https://evil.test/a.jpg", None, False),
        ("http://127.0.0.1:5000/files-pri/a.jpg", "http://127.0.0.1:5000/api/", True),
        ("http://127.0.0.1:6000/files-pri/a.jpg", "http://127.0.0.1:5000/api/", False),
    ],
)
def test_the_slack_token_goes_only_to_the_file_host(
    url: str, api_base: str | None, ok: bool
) -> None:
    assert host_allowed(url, api_base) is ok


@given(st.none() | st.text(max_size=10) | st.sampled_from(["image", "audio", "file", "media"]),
       st.none() | st.text(max_size=80) | st.dictionaries(
           st.sampled_from(["image_key", "file_key", "file_name", "duration"]),
           st.none() | st.integers() | st.text(max_size=20) | st.booleans()).map(json.dumps),
       st.text(max_size=30))  # fmt: skip
def test_feishu_file_ref_is_total(kind: Any, content: Any, message_id: str) -> None:
    found = file_ref(kind, content, message_id)
    assert found is None or found.resource in ("image", "file")
