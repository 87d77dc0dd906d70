"""The target grammar: every accepted form, and hostile or malformed input refused."""

from __future__ import annotations

import pytest

from vikingbot.delivery.targets import Target, parse_target
from vikingbot.errors import DeliveryError

KNOWN = {"slack", "telegram", "webhook", "cli"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("owner", Target("owner")),
        ("last", Target("last")),
        ("all", Target("all")),
        ("none", Target("none")),
        ("silent", Target("none")),
        ("  owner ", Target("owner")),
        ("slack", Target("channel", channel="slack")),
        ("slack:", Target("channel", channel="slack")),
        ("slack:C0123", Target("channel", channel="slack", chat_id="C0123")),
        ("slack:C0123:", Target("channel", channel="slack", chat_id="C0123")),
        (
            "slack:C0123:1712345678.123456",
            Target("channel", channel="slack", chat_id="C0123", thread="1712345678.123456"),
        ),
        (
            "telegram:-1001234567890",
            Target("channel", channel="telegram", chat_id="-1001234567890"),
        ),
        ("telegram:@my_channel", Target("channel", channel="telegram", chat_id="@my_channel")),
        ("telegram:42:7", Target("channel", channel="telegram", chat_id="42", thread="7")),
        ("webhook:ops+alerts", Target("channel", channel="webhook", chat_id="ops+alerts")),
        ("webhook:" + "a" * 128, Target("channel", channel="webhook", chat_id="a" * 128)),
        ("dashboard", Target("dashboard", slot="default")),
        ("dashboard:", Target("dashboard", slot="default")),
        ("dashboard:news", Target("dashboard", slot="news")),
        ("dashboard:Daily_Report-2", Target("dashboard", slot="Daily_Report-2")),
        ("prompt:dashboard", Target("prompt", slot="default")),
        ("prompt:dashboard:inbox-1", Target("prompt", slot="inbox-1")),
    ],
)
def test_well_formed_targets_parse(text: str, expected: Target) -> None:
    assert parse_target(text, known_channels=KNOWN) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("Owner", "channel name"),
        ("SLACK:C1", "channel name"),
        ("discord:123", "unknown channel"),
        ("1slack:C1", "channel name"),
        ("slack:C 1", "forbidden character"),
        ("slack:C1\n", "forbidden character"),
        ("slack:C1\nowner", "forbidden character"),
        ("slack:C1\r", "forbidden character"),
        ("slack:C1\x00", "forbidden character"),
        ("slack:C1\x1b[31m", "forbidden character"),
        ("slack:\tC1", "forbidden character"),
        ("slack:C1\u202e", "forbidden character"),  # right-to-left override
        ("slack:C1\u200b", "forbidden character"),  # zero-width space
        ("slack:Cé", "forbidden character"),
        ("slack:../../etc/passwd", "'..'"),
        ("slack:a..b", "'..'"),
        ("slack:C1/x", "bad chat id"),
        ("slack:C1;rm -rf", "forbidden character"),
        ("slack:<C1>", "bad chat id"),
        ("slack:" + "a" * 129, "bad chat id"),
        ("slack:C1:T1:extra", "expected <channel>"),
        ("slack::T1", "needs a chat id"),
        ("slack:C1:$(id)", "bad thread id"),
        ("x" * 301, "longer than"),
        ("owner:me", "takes no ':'"),
        ("none:x", "takes no ':'"),
        ("last:slack", "takes no ':'"),
        ("dashboard:a:b", "expected dashboard"),
        ("dashboard:" + "s" * 65, "bad dashboard slot"),
        ("dashboard:news.today", "bad dashboard slot"),
        ("prompt", "expected prompt:dashboard"),
        ("prompt:slack:C1", "expected prompt:dashboard"),
        ("prompt:dashboard:a:b", "expected prompt:dashboard"),
        ("deliver:slack:C1", "unknown channel"),
        ("<!-- deliver:owner -->", "forbidden character"),
    ],
)
def test_malformed_or_hostile_targets_are_refused(text: str, why: str) -> None:
    with pytest.raises(DeliveryError, match=why.replace("(", r"\(").replace("$", r"\$")):
        parse_target(text, known_channels=KNOWN)


def test_non_text_target_is_refused() -> None:
    with pytest.raises(DeliveryError, match="must be text"):
        parse_target(123, known_channels=KNOWN)  # type: ignore[arg-type]


def test_known_channels_default_to_the_registry() -> None:
    assert parse_target("telegram:42") == Target("channel", channel="telegram", chat_id="42")
    with pytest.raises(DeliveryError, match="unknown channel 'irc'"):
        parse_target("irc:#vikingbot")


def test_target_round_trips_through_str() -> None:
    for text in ("owner", "slack:C1", "slack:C1:17.5", "dashboard:news", "prompt:dashboard:x"):
        assert str(parse_target(text, known_channels=KNOWN)) == text


@pytest.mark.parametrize(
    ("text", "chat", "thread"),
    [
        ("matrix:!abc:example.org", "!abc:example.org", None),
        ("matrix:!abc:example.org:$event_1", "!abc:example.org", "$event_1"),
        ("matrix:!abc:localhost:8008", "!abc:localhost:8008", None),
        ("matrix:!Ab-_x", "!Ab-_x", None),
        ("slack:C1:1700000000.0001", "C1", "1700000000.0001"),
    ],
)
def test_sigil_ids_keep_their_server_part(text: str, chat: str, thread: str | None) -> None:
    found = parse_target(text, known_channels=["matrix", "slack"])
    assert (found.chat_id, found.thread) == (chat, thread)
    assert parse_target(str(found), known_channels=["matrix", "slack"]) == found


@pytest.mark.parametrize("text", ["matrix:!a:b:c:d", "matrix:!:x", "matrix:!a b:c"])
def test_a_sigil_id_with_more_parts_is_refused(text: str) -> None:
    with pytest.raises(DeliveryError):
        parse_target(text, known_channels=["matrix"])
