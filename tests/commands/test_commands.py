"""The command parser, the approval answers and the pairing rule: pure, table-tested, total."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vikingbot.commands import Approvals, parse, registry, yes_or_no
from vikingbot.commands.approvals import preview
from vikingbot.commands.pairing import (
    MAX_CODES_PER_HOUR,
    Book,
    PairingBook,
    decide_request,
    normal_code,
    parse_book,
)
from vikingbot.commands.usage import added, totals

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("/new", "new", ()),
        ("  /MODEL gpt-4o  ", "model", ("gpt-4o",)),
        ("/status@viking_bot", "status", ()),
        ("/heartbeat pause\nand more lines", "heartbeat", ("pause",)),
        ("/etc/hosts what is this", None, None),
        ("hello /new", None, None),
        ("/", None, None),
        ("/ new", None, None),
        ("/1abc", None, None),
    ],
)
def test_parse(text: str, name: str | None, args: tuple[str, ...] | None) -> None:
    inv = parse(text)
    assert (inv.name, inv.args) == (name, args) if inv is not None else name is None


@given(st.text(max_size=1000))
def test_parse_and_answers_are_total(text: str) -> None:
    inv = parse(text)
    assert inv is None or (len(inv.args) <= 8 and all(len(a) <= 200 for a in inv.args))
    assert yes_or_no(text) in (True, False, None)
    assert len(normal_code(text)) <= 40
    parse_book(text)


def test_the_registry_knows_aliases_and_hides_owner_commands_from_others() -> None:
    reg = registry()
    found = reg.find("/reset")
    assert found is not None and found[0].name == "new"
    assert reg.find("/shrug") is None  # unknown: an ordinary message for the model
    assert "/heartbeat" in reg.help(owner=True) and "/heartbeat" not in reg.help(owner=False)


def test_a_preview_masks_secrets_and_is_capped() -> None:
    shown = preview({"url": "https://bob:hunter2@example.com/x", "body": "x\n" * 1000})
    assert "hunter2" not in shown and len(shown) <= 300 and "\n" not in shown


async def test_only_the_asker_or_the_owner_answers_and_silence_denies() -> None:
    records: list[tuple[str, str]] = []
    approvals = Approvals(lambda actor, action, *_: records.append((actor, action)))
    p = approvals.open("telegram:-5", "7", "exec", {"command": "ls"})
    waiting = asyncio.create_task(approvals.wait(p, 5))
    assert approvals.answer("telegram:-5", "8", owner=False, yes=True).startswith("Only")
    assert approvals.answer("telegram:-6", "7", owner=False, yes=True).startswith("Nothing")
    assert approvals.answer("telegram:-5", "9", owner=True, yes=False) == "Denied: exec"
    assert await waiting is False
    late = approvals.open("telegram:-5", "7", "exec", {})
    assert await approvals.wait(late, 0.01) is False
    assert records == [
        ("chat:8", "approval.refuse"),
        ("chat:9", "approval.answer"),
        ("chat:7", "approval.timeout"),
    ]


def test_a_stranger_gets_one_code_and_is_limited() -> None:
    book = Book()
    book, outcome, first = decide_request(book, "telegram", "99", "99", NOW, "ABCDEF")
    assert outcome == "new" and first is not None and first.code == "ABCDEF"
    for _ in range(MAX_CODES_PER_HOUR - 1):
        book, outcome, again = decide_request(book, "telegram", "99", "99", NOW, "XXXXXX")
        assert outcome == "same" and again == first
    book, outcome, _ = decide_request(book, "telegram", "99", "99", NOW, "XXXXXX")
    assert outcome == "limited"
    later = NOW + timedelta(hours=2)  # the code expired, the attempts aged out
    book, outcome, fresh = decide_request(book, "telegram", "99", "99", later, "GHJKLM")
    assert outcome == "new" and fresh is not None and fresh.code == "GHJKLM"


def test_the_book_file_takes_a_code_once(tmp_path: Path) -> None:
    book = PairingBook(tmp_path / "pairing.json")
    outcome, req = book.request("matrix", "@eve:x", "!room:x", NOW)
    assert outcome == "new" and req is not None
    assert [r.code for r in book.pending(NOW)] == [req.code]
    typed = " ".join(req.code[:3].lower()) + "-" + req.code[3:]
    assert book.take(typed, NOW) == req
    assert book.take(req.code, NOW) is None and book.pending(NOW) == []


def test_usage_counts_add_up_by_day_and_month() -> None:
    turn: dict[str, Any] = {"requests": 1, "tokens_in": 10, "tokens_out": 2, "cost_usd": 0.5}
    usage = added(None, "2026-12-05", turn)
    usage = added(usage, "2026-12-06", turn)
    usage = added(usage, "2026-12-06", turn)
    assert totals(usage, "2026-12-06")["tokens_in"] == 20
    assert totals(usage, "2026-12")["cost_usd"] == 1.5
    assert totals("garbage", "2026")["requests"] == 0
