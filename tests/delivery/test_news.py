"""Once per piece of news: which texts are the same news (delivery/news.news_form)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from vikingbot.delivery.news import news_form


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The build is red since 11:40.", "the build is RED since 11:40."),
        ("The build is red since 11:40.", "The build is **red** since 11:40."),
        ("The build is red since 11:40.", "<b>The build</b> is red\n  since 11:40."),
        ("No rain tomorrow.", "## No rain tomorrow.\n"),
        ("- one\n- two", "* one * two"),
        ("Use `uv sync`", "use uv sync"),
    ],
)
def test_the_same_news_in_other_clothes(a: str, b: str) -> None:
    assert news_form(a) == news_form(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The build is red since 11:40.", "The build is red since 11:45."),
        ("No rain tomorrow.", "Rain tomorrow."),
        ("3 < 4 and 5 > 2", "3 4 and 5 2 extra"),
    ],
)
def test_other_news(a: str, b: str) -> None:
    assert news_form(a) != news_form(b)


def test_a_stray_angle_bracket_is_text() -> None:
    assert news_form("a < b") == "a < b"


@given(st.text())
@example("-\r0")  # a list mark before a carriage return
@example("*-* 0\n-\n1")  # a list mark that markup hid; a line that is only a mark
def test_total_and_stable(text: str) -> None:
    once = news_form(text)
    assert news_form(once) == once  # folding twice changes nothing
