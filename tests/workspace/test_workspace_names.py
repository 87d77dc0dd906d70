"""safe_name: no session key can name a folder outside the workspace root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.workspace.names import MAX_NAME, is_reserved, safe_name

HOSTILE = [
    "../../etc",
    "..\\..\\windows",
    "a/b",
    "/etc/passwd",
    "C:\\x",
    "C:",
    "CON",
    "con",
    "NUL",
    "nul.txt",
    "Com1.tar.gz",
    "LPT9",
    "a\0b",
    "\0",
    "x" * 300,
    "🚀🔥",
    ".",
    "..",
    "...",
    "",
    "   ",
    ".hidden",
    "..hidden",
    "trailing.",
    "-rf",
    "~",
    "$HOME",
    "a\nb",
    "ws-0123456789",
]
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


def assert_safe(name: str, root: Path) -> None:
    assert _SAFE.match(name), name
    assert 0 < len(name) <= MAX_NAME
    assert name not in (".", "..")
    assert not name.startswith((".", "-"))
    assert not name.endswith(".")
    assert not is_reserved(name)
    assert (root / name).resolve().parent == root.resolve()


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_gives_a_safe_folder_inside_the_root(text: str, tmp_path: Path) -> None:
    name = safe_name(text)
    assert_safe(name, tmp_path)
    (tmp_path / name).mkdir()
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_hostile_texts_never_share_a_folder() -> None:
    names = [safe_name(t) for t in HOSTILE]
    assert len({n.lower() for n in names}) == len(HOSTILE)


@pytest.mark.parametrize("text", ["shared", "abc", "telegram-123", "notes.v2", "a_b"])
def test_clean_lower_case_names_are_kept(text: str) -> None:
    assert safe_name(text) == text


def test_cleaned_names_stay_readable() -> None:
    assert safe_name("telegram:default:123").startswith("telegram_default_123-")
    assert safe_name("x" * 300).startswith("x" * 80)


def test_names_differing_only_in_case_get_different_folders() -> None:
    assert safe_name("Alice").lower() != safe_name("alice").lower()


def test_a_name_that_looks_hashed_cannot_collide_with_a_hashed_one() -> None:
    hashed = safe_name("a/b")
    assert safe_name(hashed) != hashed


@given(st.text(max_size=400))
def test_any_text_gives_a_safe_name(text: str) -> None:
    name = safe_name(text)
    assert _SAFE.match(name)
    assert len(name) <= MAX_NAME
    assert not name.startswith((".", "-")) and not is_reserved(name)


@given(st.text(max_size=120), st.text(max_size=120))
def test_different_texts_give_different_names(a: str, b: str) -> None:
    if a != b:
        assert safe_name(a).lower() != safe_name(b).lower()
