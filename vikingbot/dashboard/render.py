"""Templates and the one way model or file text becomes HTML.

Jinja2 autoescapes every value. Text that is Markdown (replies, inbox items) goes
through ``markdown`` (markdown-it, raw HTML off) and then ``nh3`` (an allowlist
sanitiser): a reply holding ``<script>`` or ``onerror=`` is shown, never run.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

HERE = Path(__file__).parent
ALLOWED_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote",
    "h1", "h2", "h3", "h4", "a", "hr", "table", "thead", "tbody", "tr", "th", "td", "del",
}  # fmt: skip
ALLOWED_ATTRS: dict[str, set[str]] = {"a": {"href", "title"}}
MAX_MARKDOWN = 200_000


@cache
def _md() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str | None) -> Markup:
    """Markdown → sanitised HTML (links keep http/https/mailto only)."""
    import nh3

    raw = (text or "")[:MAX_MARKDOWN]
    html = _md().render(raw)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return Markup(clean)


def when(value: datetime | str | None) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        at = value
    if at.tzinfo is None:
        return at.strftime("%Y-%m-%d %H:%M:%S")
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def money(value: float | None) -> str:
    return f"${(value or 0.0):.4f}"


@cache
def environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["when"] = when
    env.filters["money"] = money
    from vikingbot.dashboard.explain import explain
    from vikingbot.heartbeat.planner import ledger_name

    env.globals["explain"] = explain
    env.globals["run_name"] = ledger_name
    return env


def render(template: str, /, **context: Any) -> str:
    return str(environment().get_template(template).render(**context))
