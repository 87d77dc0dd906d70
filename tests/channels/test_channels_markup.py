"""The agent's Markdown as Telegram HTML and Slack mrkdwn: what each platform shows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fake_telegram import html_problem
from vikingbot.channels.markup import to_slack_mrkdwn, to_telegram_html

CASES = [
    # (markdown, telegram html, slack mrkdwn)
    ("**done** and _soon_", "<b>done</b> and <i>soon</i>", "*done* and _soon_"),
    ("~~old~~ `x<y`", "<s>old</s> <code>x&lt;y</code>", "~old~ `x&lt;y`"),
    (
        "see [the docs](https://e.org/?a=1&b=2)",
        'see <a href="https://e.org/?a=1&amp;b=2">the docs</a>',
        "see <https://e.org/?a=1&amp;b=2|the docs>",
    ),
    ("# Build report", "<b>Build report</b>", "*Build report*"),
    ("- red\n- green", "• red\n• green", "• red\n• green"),
    ("3. three\n4. four", "3. three\n4. four", "3. three\n4. four"),
    ("> careful", "<blockquote>careful</blockquote>", "> careful"),
    (
        "```sh\nmake && echo <ok>\n```",
        '<pre><code class="language-sh">make &amp;&amp; echo &lt;ok&gt;</code></pre>',
        "```\nmake &amp;&amp; echo &lt;ok&gt;\n```",
    ),
    ("a <b>tag</b> & more", "a &lt;b&gt;tag&lt;/b&gt; &amp; more", "a &lt;b&gt;tag&lt;/b&gt; &amp; more"),
    ("| os | ok |\n|---|---|\n| linux | yes |", "<pre>os | ok\nlinux | yes</pre>", "```\nos | ok\nlinux | yes\n```"),
    ("![chart](https://e.org/c.png)", '<a href="https://e.org/c.png">chart</a>', "<https://e.org/c.png|chart>"),
    ("first\n\nsecond", "first\n\nsecond", "first\n\nsecond"),
]  # fmt: skip


@pytest.mark.parametrize(("markdown", "telegram", "slack"), CASES)
def test_markdown_is_rendered_for_each_platform(markdown: str, telegram: str, slack: str) -> None:
    assert to_telegram_html(markdown) == telegram
    assert to_slack_mrkdwn(markdown) == slack


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab *_~`[]()<>#>-|\n!1.")), max_size=200))
def test_rendered_text_grows_at_most_a_line_break_per_line(text: str) -> None:
    """Pieces are split to the platform's limit before rendering; what a reader sees
    (markup removed, entities counted once) grows by at most one blank line per
    source line (a list right under a paragraph gets one), and Telegram's limit
    (4,096) leaves room over the 4,000 a piece holds; beyond it the raw piece is sent."""
    import html
    import re

    shown = html.unescape(re.sub(r"<[^>]+>", "", to_telegram_html(text)))
    assert len(shown) <= len(text) + text.count("\n")


def test_no_words_are_lost() -> None:
    text = "Hi **Ann**,\n\n1. renew the *passport*\n2. call <Bob>\n\n> note: `rm -rf` & co"
    for rendered in (to_telegram_html(text), to_slack_mrkdwn(text)):
        for word in ("Ann", "renew", "passport", "call", "Bob", "note", "rm -rf", "co"):
            assert word in rendered


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab *_~`[]()<>&#>-|\n!1.\\\"'")), max_size=80))
def test_any_text_gives_html_telegram_accepts(text: str) -> None:
    assert html_problem(to_telegram_html(text)) is None
    assert isinstance(to_slack_mrkdwn(text), str)
