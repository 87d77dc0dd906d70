"""The Matrix channel's pure parts: reading timeline events, invites, HTML, transaction ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.channels.matrix import (
    Text,
    invite_from,
    room_problem,
    text_event,
    to_matrix_html,
    txn_id,
)

ME = "@bot:example.org"
ROOM = "!room:example.org"


def event(body: Any = "hello", **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "m.room.message",
        "sender": "@alice:example.org",
        "event_id": "$e1",
        "origin_server_ts": 1700000000000,
        "content": {"msgtype": "m.text", "body": body},
    }
    base.update(over)
    return base


def test_a_persons_text_is_read_with_its_thread_and_mention() -> None:
    threaded = event(
        "bot: ping",
        content={
            "msgtype": "m.text",
            "body": "bot: ping",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root"},
        },
    )
    assert text_event(ROOM, threaded, ME) == Text(
        ROOM, "@alice:example.org", "bot: ping", "$e1", 1700000000000, "$root", True
    )
    assert text_event(ROOM, event("plain words"), ME).mentioned is False  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        "text",
        event(type="m.room.member"),
        event(sender=ME),  # the bot's own message
        event(""),
        event(42),
        event(content={"msgtype": "m.notice", "body": "from another bot"}),
        event(content={"msgtype": "m.image", "body": "cat.png"}),
        event(
            content={"msgtype": "m.text", "body": "x", "m.relates_to": {"rel_type": "m.replace"}}
        ),
        event(origin_server_ts="soon"),
        event(origin_server_ts=True),
        event(event_id=None),
        event(content="not an object"),
    ],
)
def test_anything_else_is_not_a_message(bad: Any) -> None:
    assert text_event(ROOM, bad, ME) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


@given(json_values)
def test_reading_an_event_never_raises(value: Any) -> None:
    text_event(ROOM, value, ME)
    invite_from(value, ME)
    text_event(ROOM, {"type": "m.room.message", "content": value}, ME)


def test_an_invite_names_who_invited_the_bot() -> None:
    state = {
        "events": [
            {"type": "m.room.name", "content": {"name": "x"}},
            {
                "type": "m.room.member",
                "state_key": ME,
                "sender": "@alice:example.org",
                "content": {"membership": "invite"},
            },
        ]
    }
    assert invite_from(state, ME) == "@alice:example.org"
    assert invite_from({"events": "nope"}, ME) is None


def test_markdown_becomes_matrix_html_and_raw_html_stays_text() -> None:
    html = to_matrix_html("**bold** <script>alert(1)</script> ![cat](https://x/c.png)")
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<a href="https://x/c.png">cat</a>' in html and "<img" not in html


def test_the_same_outbox_key_is_the_same_transaction() -> None:
    assert txn_id("hb:run-7") == txn_id("hb:run-7") != txn_id("hb:run-7:2/3")
    assert txn_id("a/b c").replace("-", "").isalnum()


@pytest.mark.parametrize(
    ("chat", "ok"),
    [(ROOM, True), ("!opaqueV12roomid", True), ("general", False), ("!", False), ("!a b", False)],
)
def test_a_target_must_be_a_room_id(chat: str, ok: bool) -> None:
    assert (room_problem(chat) is None) is ok
