"""Session file names and line encoding."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.errors import SessionError
from vikingbot.session import codec
from vikingbot.session.types import SessionKey

_NAME_CHARS = re.compile(r"^[A-Za-z0-9._%+~-]+\.jsonl$")


@pytest.mark.parametrize(
    ("key", "name"),
    [
        (SessionKey("telegram", "default", "12345"), "telegram+default+12345.jsonl"),
        (SessionKey("cli", "default", "a:b"), "cli+default+a%3ab.jsonl"),
        (SessionKey("webhook", "default", "../../etc"), "webhook+default+..%2f..%2fetc.jsonl"),
        (SessionKey(".x", "default", "1"), "%2ex+default+1.jsonl"),
        (SessionKey("cli", "default", "100%"), "cli+default+100%25.jsonl"),
        (SessionKey("cli", "default", "grüß"), "cli+default+gr%c3%bc%c3%9f.jsonl"),
    ],
)
def test_readable_names_decode_back_to_the_key(key: SessionKey, name: str) -> None:
    assert codec.key_to_filename(key) == name
    assert codec.filename_to_key(name) == key


def test_keys_differing_only_in_case_get_different_names_on_case_insensitive_disks() -> None:
    names = {
        codec.key_to_filename(SessionKey("slack", "T1", "C2")).lower(),
        codec.key_to_filename(SessionKey("slack", "t1", "c2")).lower(),
        codec.key_to_filename(SessionKey("slack", "T1", "c2")).lower(),
    }
    assert len(names) == 3


def test_long_keys_are_bounded_and_still_distinct() -> None:
    a = codec.key_to_filename(SessionKey("slack", "default", "x" * 300 + "a"))
    b = codec.key_to_filename(SessionKey("slack", "default", "x" * 300 + "b"))
    assert a != b
    assert len(a) <= codec.MAX_STEM + len(codec.SUFFIX)
    assert codec.filename_to_key(a) is None  # the metadata line holds the key


def test_foreign_file_names_do_not_decode() -> None:
    assert codec.filename_to_key("notes.txt") is None
    assert codec.filename_to_key("only+two.jsonl") is None


_part = st.text(min_size=1, max_size=80).filter(lambda s: ":" not in s)


@given(_part, _part, st.text(min_size=1, max_size=300))
def test_any_key_gives_a_safe_bounded_name(kind: str, channel: str, chat: str) -> None:
    key = SessionKey(kind, channel, chat)
    name = codec.key_to_filename(key)
    assert _NAME_CHARS.match(name)
    assert not name.startswith(".")
    assert len(name) <= codec.MAX_STEM + len(codec.SUFFIX)
    decoded = codec.filename_to_key(name)
    assert decoded is None or decoded == key


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_different_keys_never_share_a_file(a: str, b: str) -> None:
    ka, kb = SessionKey("t", "c", a), SessionKey("t", "c", b)
    if ka != kb:
        assert codec.key_to_filename(ka).lower() != codec.key_to_filename(kb).lower()


def test_naive_datetimes_are_refused_on_write() -> None:
    with pytest.raises(SessionError, match="timezone-aware"):
        codec.dump_dt(datetime(2026, 1, 1, 12, 0))
    assert codec.dump_dt(datetime(2026, 1, 1, 12, 0, tzinfo=UTC)) == "2026-01-01T12:00:00+00:00"


def test_times_without_offset_are_read_as_utc() -> None:
    got = codec.load_dt("2026-01-01T12:00:00", "f:1", "created_at")
    assert got == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(SessionError, match=r"f:1: created_at is not an ISO-8601 time"):
        codec.load_dt("yesterday", "f:1", "created_at")
