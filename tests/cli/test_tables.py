"""Issue 16: one table style for every listing, readable at 80 columns, nothing cut.

The layout is pure (``render``), tested on fixed rows; the listings are driven
through the CLI runner at ``COLUMNS=80`` with exact values for each stumble the
issue names (schedules under "error", ``2026-…``, ``skip-f…``, ``deliv…``,
microseconds in ``heartbeat status``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from typer.testing import Result

from vikingbot.cli.tables import Col, ago, local, render, until
from vikingbot.testing.fake_openai import FakeOpenAI, reply

Cli = Callable[..., Result]
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
COLS = [
    Col("workspace", merge=True),
    Col("entry", wrap=True),
    Col("reason"),
    Col("outcome"),
    Col("detail", wrap=True),
]
ROWS = [
    ["shared", "Morning brief", "skip-flag", "", "daily at 08:30"],
    ["shared", "Check the weather for Berlin and tell me if it rains", "due", "delivered", ""],
    ["shared", "Reviews", "checker-missing", "", "x" * 70],
]


def test_codes_stay_whole_text_wraps_and_nothing_is_cut_at_80_columns() -> None:
    text = render("Heartbeat runs", COLS, ROWS, width=80)
    lines = text.splitlines()
    assert lines[0] == "Heartbeat runs (workspace shared)"  # one value: in the title
    assert re.fullmatch(r"entry\s+reason\s+outcome\s+detail", lines[1])
    assert set(lines[2]) <= {"─", " "}
    assert all(len(x) <= 80 for x in lines), text
    assert "…" not in text
    for code in ("skip-flag", "checker-missing", "delivered", "daily at 08:30"):
        assert re.search(rf"(^|  ){re.escape(code)}(  |$)", text, re.M), code
    # the long word is folded onto following lines, every character kept
    assert "".join(re.findall(r"x+", text)) == "x" * 70
    # the wrapped entry keeps all its words, in order, within its own column
    entry = " ".join(x for x in column(text, 0) if x)
    assert "Check the weather for Berlin and tell me if it rains" in entry, entry


def column(text: str, n: int) -> list[str]:
    """Column ``n`` of a rendered table, cut at the rule's segments, one string per line."""
    lines = text.splitlines()
    rule = next(i for i, x in enumerate(lines) if x and set(x) <= {"─", " "})
    spans = [m.span() for m in re.finditer("─+", lines[rule])]
    start, end = spans[n][0], spans[n + 1][0] if n + 1 < len(spans) else None
    return [x[start:end].strip() for x in lines[rule + 1 :]]


def test_without_a_width_every_row_is_one_line_for_grep() -> None:
    text = render(None, COLS, ROWS, width=None)
    assert len(text.splitlines()) == 3 + len(ROWS)  # title (the merged column), header, rule
    assert "Check the weather for Berlin and tell me if it rains" in text


def test_notes_go_under_their_row_indented_and_wrapped() -> None:
    cols = [Col("at"), Col("reason")]
    note = "error: " + "the model said no " * 8
    text = render(
        None, cols, [["just now", "due"], ["2 h ago", "not-due"]], notes=[note, None], width=60
    )
    lines = text.splitlines()
    assert lines[2].startswith("just now") and lines[3].startswith("    error: the model")
    assert all(len(x) <= 60 for x in lines)
    assert lines[-1].startswith("2 h ago")
    assert " ".join(" ".join(lines[3:-1]).split()) == " ".join(note.split())


WIDE_COLS = [Col("entry", wrap=True), Col("reason"), Col("calls", right=True)]
WIDE_ROWS = [
    ["天気を確認して、明日ベルリンで雨が降るか教えてください", "due", "1"],
    ["Morning brief ☀️ for 👨‍👩‍👧 family", "skip-flag", "12"],
    ["Café déjà vu (e\u0301 combining)", "not-due", "3"],
    ["plain", "stale", "100"],
]


def body(text: str) -> list[str]:
    """The header, rule and row lines of a rendered table (no title)."""
    lines = text.splitlines()
    rule = next(i for i, x in enumerate(lines) if x and set(x) <= {"─", " "})
    return lines[rule - 1 :]


def test_cjk_and_emoji_rows_line_up_on_screen() -> None:
    # the last column is right-aligned: a row whose cells are padded by display width
    # ends exactly under the rule; padded by len() a CJK row ends 26 cells further right
    lines = body(render(None, WIDE_COLS, WIDE_ROWS, width=None))
    rule = cell_len(lines[1])
    assert [cell_len(x) for x in lines[2:]] == [rule] * len(WIDE_ROWS), "\n".join(lines)
    assert lines[2].startswith("天気を確認して")


def test_wide_text_wraps_by_display_width_and_keeps_every_character() -> None:
    text = render(None, WIDE_COLS, WIDE_ROWS, width=40)
    lines = body(text)
    assert all(cell_len(x) <= 40 for x in lines), text
    # the CJK entry (54 cells) is folded between characters, every character kept in order
    entry = "".join(x[: x.index("  ")] if "  " in x else x for x in lines[2:6])
    assert "天気を確認して、明日ベルリンで雨が降るか教えてください" in entry.replace(" ", ""), text
    assert "👨‍👩‍👧" in text  # an emoji sequence is never cut apart


def test_control_characters_are_shown_not_sent_to_the_terminal() -> None:
    text = render(None, WIDE_COLS, [["evil\x1b[2Jname\u202e", "due", "1"]], notes=["a\x07b"])
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "evil\\x1b[2Jname\\u202e" in text and "a\\x07b" in text


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(st.characters(exclude_characters="|"), max_size=40), st.integers(0, 99)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([None, 30, 80]),
)
def test_every_row_ends_under_the_rule_whatever_the_text(
    data: list[tuple[str, int]], width: int | None
) -> None:
    rows: list[list[str | None]] = [[text, "skip-flag", f"{n}|"] for text, n in data]
    lines = body(render(None, WIDE_COLS, rows, width=width))
    rule = cell_len(lines[1])
    # each row's first line carries its right-aligned "n|" (no text has a "|"), which
    # ends under the rule
    ends = [cell_len(x) for x in lines[2:] if x.endswith("|")]
    assert len(ends) == len(rows) and set(ends) == {rule}, "\n".join(lines)
    if width is not None:
        assert all(cell_len(x) <= max(width, rule) for x in lines), "\n".join(lines)


def test_no_rows_prints_the_empty_text() -> None:
    assert render("T", COLS, [], empty="no runs yet", width=80) == "no runs yet\n"


@pytest.mark.parametrize(
    ("when", "said"),
    [
        (NOW, "just now"),
        (NOW - timedelta(seconds=40), "40 s ago"),
        (NOW - timedelta(minutes=12, seconds=5), "12 min ago"),
        (NOW - timedelta(hours=3, minutes=59), "3 h ago"),
        (NOW - timedelta(days=2), "2 d ago"),
        ("2026-03-10T11:57:59.123456+00:00", "2 min ago"),  # the JSON's ISO text
        (None, "-"),
    ],
)
def test_ago(when: object, said: str) -> None:
    assert ago(when, NOW) == said


@pytest.mark.parametrize(
    ("when", "said"),
    [
        (NOW + timedelta(minutes=3), "in 3 min"),
        (NOW + timedelta(hours=2, minutes=1), "in 2 h"),
        (NOW - timedelta(minutes=1), "now"),
        ("now", "now"),
        (None, "-"),
    ],
)
def test_until(when: object, said: str) -> None:
    assert until(when, NOW) == said


def test_far_times_are_local_to_the_minute_without_microseconds() -> None:
    far = NOW - timedelta(days=30, microseconds=123456)
    expected = far.astimezone().strftime("%Y-%m-%d %H:%M")
    assert ago(far, NOW) == local(far) == expected
    assert until(NOW + timedelta(days=9), NOW) == (NOW + timedelta(days=9)).astimezone().strftime(
        "%Y-%m-%d %H:%M"
    )


# ------------------------------------------------------------------ the listings


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def ready(cli: Cli, home: Path, llm: FakeOpenAI, fresh_session: Callable[[str], None]) -> Path:
    """An onboarded home with a fake model, a fresh chat and the README's kind of tasks."""
    assert cli("onboard").exit_code == 0
    for key, value in (
        ("bot.agents.provider", "openai"),
        ("bot.agents.model", "fake-model"),
        ("bot.providers.openai", json.dumps({"apiKey": "sk-t", "apiBase": llm.base_url})),
        ("bot.heartbeat.mode", "per-task"),
    ):
        assert cli("config", "set", key, value).exit_code == 0
    fresh_session("telegram:default:42")
    fresh_session("cli:default:local")
    assert cli("sessions", "heartbeat", "off", "telegram:default:42").exit_code == 0
    path = home / "data" / "workspace" / "shared" / "HEARTBEAT.md"
    marker = "<!-- Add your periodic tasks below this line -->\n"
    path.write_text(
        path.read_text("utf-8").replace(
            marker,
            marker
            + "\n- Check the weather for Berlin and tell me if it will rain tomorrow.\n"
            + "- every: 30m title: Reviews task: Summarise new review requests.\n"
            + "- daily: 08:30 title: Morning brief task: Give me today's calendar.\n",
        ),
        "utf-8",
    )
    return path


def at80(cli: Cli, *args: str) -> Result:
    result = cli(*args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout, result.stdout
    assert all(len(x) <= 80 for x in result.stdout.splitlines()), result.stdout
    return result


def header_and_rule(out: str, header: str) -> None:
    """The one style: a header line, then a rule of '─' under each column."""
    lines = out.splitlines()
    (i,) = [n for n, x in enumerate(lines) if re.fullmatch(header, x)]
    assert set(lines[i + 1]) <= {"─", " "} and "─" in lines[i + 1], out


def test_run_now_and_runs_at_80_columns(cli: Cli, ready: Path, llm: FakeOpenAI) -> None:
    llm.default = reply("It will rain tomorrow in Berlin.")
    out = at80(cli, "heartbeat", "run-now").stdout
    header_and_rule(out, r"session or entry\s+reason\s+outcome\s+calls\s+tokens")
    assert "error" not in out.splitlines()[1]  # no "error" column holding schedules
    # codes whole, on the row of their entry
    assert re.search(r"^telegram:default:42\s+skip-flag$", out, re.M), out
    assert re.search(r"^Reviews\s+not-due$", out, re.M), out
    assert re.search(r"^Morning brief\s+not-due$", out, re.M), out
    assert re.search(r"\s+manual\s+(delivered|inboxed)\s+1\s+\d+$", out, re.M), out
    # a skip's schedule is a note under its row, not an error
    assert "\n    every 30m\n" in out and "\n    daily at 08:30\n" in out

    out = at80(cli, "heartbeat", "runs").stdout
    header_and_rule(out, r"at\s+session or entry\s+reason\s+outcome\s+calls\s+tokens")
    assert "2026-…" not in out and not re.search(r"\d\d:\d\d:\d\d\.\d", out)
    assert re.search(r"^(just now|\d+ s ago)\s+telegram:default:42\s+skip-flag$", out, re.M), out
    assert re.search(r"^(just now|\d+ s ago)\s+Reviews\s+not-due$", out, re.M), out


def test_status_has_no_microseconds_and_says_how_far(
    cli: Cli, ready: Path, llm: FakeOpenAI
) -> None:
    llm.default = reply("HEARTBEAT_OK")
    at80(cli, "heartbeat", "run-now")
    out = at80(cli, "heartbeat", "status").stdout
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", out), out
    assert "+00:00" not in out
    header_and_rule(out, r"workspace\s+paused\s+last outcome\s+last run\s+now\s+next due")
    assert re.search(
        r"^shared\s+completed\s+(just now|\d+ s ago)\s+not-due\s+in \d+ min$", out, re.M
    ), out


def test_every_listing_has_the_same_style(cli: Cli, ready: Path) -> None:
    assert (
        cli(
            "cron",
            "add",
            "digest",
            "--cron",
            "0 8 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--prompt",
            "Summarise my inbox",
        ).exit_code
        == 0
    )
    out = at80(cli, "cron", "list").stdout
    header_and_rule(out, r"name\s+schedule\s+status\s+next\s+target")
    assert re.search(r"^digest\s+cron 0 8 \* \* 1-5 \(Europe/Berlin\)\s+scheduled\s+in ", out, re.M)
    header_and_rule(
        at80(cli, "sessions", "list").stdout,
        r"key\s+updated\s+last user message\s+heartbeat\s+messages",
    )
    header_and_rule(
        at80(cli, "channels", "status").stdout,
        r"channel\s+enabled\s+configured\s+owner chat\s+allow from",
    )
    out = at80(cli, "heartbeat", "plan", "--all").stdout
    header_and_rule(out, r"session or entry\s+decision\s+reason\s+detail")
    assert re.search(r"^Morning brief\s+skip\s+not-due\s+daily at 08:30, next ", out, re.M), out
