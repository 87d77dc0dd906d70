"""Model and file text becomes inert HTML; the chart is plain SVG; login tokens work once."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from vikingbot.dashboard.auth import Auth, csrf_ok
from vikingbot.dashboard.chart import calls_chart
from vikingbot.dashboard.pages import memory_rows
from vikingbot.dashboard.render import markdown, render
from vikingbot.memory import versions


def test_markdown_keeps_formatting_and_drops_anything_that_could_run() -> None:
    html = str(
        markdown(
            "**Build** is red\n\n<script>alert(1)</script>\n\n"
            '<img src=x onerror="alert(2)">\n\n[x](javascript:alert(3)) [ok](https://example.org)'
        )
    )
    assert "<strong>Build</strong>" in html
    assert "<script" not in html and "<img" not in html
    assert 'href="javascript' not in html
    assert 'href="https://example.org"' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not dropped


def test_templates_escape_values() -> None:
    out = render("_problems.html", problems=[type("P", (), {"line": 3, "message": "<b>x</b>"})()])
    assert "&lt;b&gt;x&lt;/b&gt;" in out and "<b>x</b>" not in out


def test_a_workspace_page_lists_memory_changes_with_their_diff(tmp_path: Path) -> None:
    versions.change(tmp_path, {"USER.md": lambda t: t + "- likes <b>tea</b>\n"}, "remember (x)")
    out = render("_memory.html", memory=memory_rows(tmp_path), name="shared")
    assert "remember (x)" in out and "+1 -0" in out
    assert "+- likes &lt;b&gt;tea&lt;/b&gt;" in out  # the diff, as text
    assert "No memory changes" in render("_memory.html", memory=[], name="shared")


def test_chart_has_one_bar_per_day_and_scales_to_the_busiest() -> None:
    days = [(date(2026, 11, d), n) for d, n in [(1, 0), (2, 5), (3, 10)]]
    svg = calls_chart(days)
    assert svg.count("<rect") == 3
    assert "2026-11-03: 10 model calls" in svg
    assert 'height="0.0"' in svg  # the idle day has no bar


def test_a_login_token_works_once_and_secrets_are_checked() -> None:
    clock = [0.0]
    auth = Auth(lambda: ["the-secret"], now=lambda: clock[0])
    token = auth.issue_login_token()
    first = auth.login(token)
    assert first is not None
    assert auth.login(token) is None  # used up
    assert auth.login("wrong") is None
    sid, session = first
    assert auth.session(sid) is session
    assert (
        csrf_ok(session, session.csrf) and not csrf_ok(session, "") and not csrf_ok(session, None)
    )
    assert auth.login("the-secret") is not None
    late = auth.issue_login_token()
    clock[0] += 121
    assert auth.login(late) is None  # expired after two minutes
