"""The agent's Markdown in each platform's own format (pure).

Models answer in CommonMark. Telegram shows it as literal asterisks unless it is
sent as Telegram HTML, and Slack reads its own *mrkdwn* (``*bold*``,
``<url|text>``). The text is parsed once with markdown-it-py and rendered for
each platform:

| Markdown | Telegram HTML | Slack mrkdwn |
|---|---|---|
| ``**b**`` / ``_i_`` / ``~~s~~`` | ``<b>`` / ``<i>`` / ``<s>`` | ``*b*`` / ``_i_`` / ``~s~`` |
| `` `c` `` and fenced code | ``<code>``, ``<pre><code class="language-x">`` | `` `c` ``, triple backticks |
| ``[t](u)`` | ``<a href="u">t</a>`` | ``<u|t>`` |
| ``# Heading`` | ``<b>Heading</b>`` | ``*Heading*`` |
| lists, quotes, rules, tables | ``•``/``1.`` lines, ``<blockquote>``, a line, ``<pre>`` rows | ``•``/``1.`` lines, ``>`` lines, a line, a code block |

The raw text is split to the platform's limit first (``channels/text.py``, which
keeps code fences whole), then each piece is rendered here.

Nothing the model wrote is dropped: raw HTML in the Markdown is shown as text,
images become links. Rendering never raises; any input gives well-formed output.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

Flavour = Literal["telegram", "slack"]

# (open, close) per inline mark and flavour.
_MARKS: dict[str, dict[Flavour, tuple[str, str]]] = {
    "strong": {"telegram": ("<b>", "</b>"), "slack": ("*", "*")},
    "em": {"telegram": ("<i>", "</i>"), "slack": ("_", "_")},
    "s": {"telegram": ("<s>", "</s>"), "slack": ("~", "~")},
}


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])


def to_telegram_html(markdown: str) -> str:
    """Markdown as Telegram HTML (send with ``parse_mode="HTML"``)."""
    return _render(markdown, "telegram")


def to_slack_mrkdwn(markdown: str) -> str:
    """Markdown as Slack mrkdwn (send with ``mrkdwn=True``)."""
    return _render(markdown, "slack")


def _escape(text: str, flavour: Flavour) -> str:
    if flavour == "telegram":
        return html.escape(text, quote=False)
    # Slack: only &, < and > are control characters in mrkdwn text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(children: Sequence[Token], flavour: Flavour) -> str:
    out: list[str] = []
    for tok in children:
        kind = tok.type
        base = kind.removesuffix("_open").removesuffix("_close")
        if base in _MARKS and kind != base:
            opener, closer = _MARKS[base][flavour]
            out.append(opener if kind.endswith("_open") else closer)
        elif kind == "text":
            out.append(_escape(tok.content, flavour))
        elif kind == "code_inline":
            out.append(_code_inline(tok.content, flavour))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "link_open":
            href = str(tok.attrs.get("href", ""))
            if flavour == "telegram":
                out.append(f'<a href="{html.escape(href, quote=True)}">')
            else:
                out.append("<" + _escape(href, flavour).replace("|", "%7C") + "|")
        elif kind == "link_close":
            out.append("</a>" if flavour == "telegram" else ">")
        elif kind == "image":
            src = str(tok.attrs.get("src", ""))
            alt = tok.content or src
            out.append(_link(src, alt, flavour))
        else:  # html_inline and anything new: shown as written
            out.append(_escape(tok.content, flavour))
    return "".join(out)


def _code_inline(code: str, flavour: Flavour) -> str:
    if flavour == "telegram":
        return f"<code>{_escape(code, flavour)}</code>"
    return "`" + _escape(code.replace("`", "'"), flavour) + "`"


def _link(href: str, text: str, flavour: Flavour) -> str:
    if flavour == "telegram":
        return f'<a href="{html.escape(href, quote=True)}">{_escape(text, flavour)}</a>'
    return f"<{_escape(href, flavour).replace('|', '%7C')}|{_escape(text, flavour)}>"


def _code_block(code: str, language: str, flavour: Flavour) -> str:
    code = code.rstrip("\n")
    if flavour == "telegram":
        lang = language.split()[0] if language.strip() else ""
        attr = f' class="language-{html.escape(lang, quote=True)}"' if lang else ""
        return f"<pre><code{attr}>{_escape(code, flavour)}</code></pre>"
    return "```\n" + _escape(code.replace("```", "'''"), flavour) + "\n```"


def _render(markdown: str, flavour: Flavour) -> str:
    tokens = _parser().parse(markdown)
    blocks: list[str] = []
    lists: list[list[int]] = []  # per open list: [next number], or [] for bullets
    quote = 0
    row: list[str] = []
    rows: list[list[str]] = []
    prefix = ""
    for index, tok in enumerate(tokens):
        kind = tok.type
        before = tokens[index - 1].type if index else ""
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = tok.attrs.get("start", 1)
            lists.append([int(start)] if kind == "ordered_list_open" else [])
        elif kind in ("bullet_list_close", "ordered_list_close") and lists:
            lists.pop()
        elif kind == "list_item_open":
            depth = "  " * max(len(lists) - 1, 0)
            if lists and lists[-1]:
                prefix = f"{depth}{lists[-1][0]}. "
                lists[-1][0] += 1
            else:
                prefix = f"{depth}• "
        elif kind == "blockquote_open":
            quote += 1
        elif kind == "blockquote_close":
            quote = max(quote - 1, 0)
        elif kind == "inline" and before in ("th_open", "td_open"):
            row.append(_escape(tok.content, flavour))  # cells as written: <pre> holds no marks
        elif kind == "tr_close":
            rows.append(row)
            row = []
        elif kind == "table_close":
            blocks.append(_quoted(_table(rows, flavour), quote, flavour))
            rows = []
        elif kind == "inline":
            text = _inline(tok.children or [], flavour)
            if before == "heading_open":
                opener, closer = _MARKS["strong"][flavour]
                text = f"{opener}{text}{closer}"
            blocks.append(_quoted(prefix + text, quote, flavour))
            prefix = ""
        elif kind in ("fence", "code_block"):
            blocks.append(_quoted(_code_block(tok.content, tok.info, flavour), quote, flavour))
        elif kind == "hr":
            blocks.append("———")  # no longer than the "---" it replaces
        elif kind == "html_block":
            blocks.append(_quoted(_escape(tok.content.rstrip("\n"), flavour), quote, flavour))
    return _join(blocks)


def _quoted(text: str, depth: int, flavour: Flavour) -> str:
    if depth == 0:
        return text
    if flavour == "telegram":
        return "<blockquote>" * depth + text + "</blockquote>" * depth
    return "\n".join("> " * depth + line for line in text.split("\n"))  # a literal > quotes


def _table(rows: list[list[str]], flavour: Flavour) -> str:
    width = max((len(r) for r in rows), default=0)
    lines = [" | ".join(r + [""] * (width - len(r))).rstrip() for r in rows]
    body = "\n".join(lines)
    return f"<pre>{body}</pre>" if flavour == "telegram" else "```\n" + body + "\n```"


def _join(blocks: list[str]) -> str:
    """Blocks one per line; list items stay together, other blocks get a blank line."""
    out: list[str] = []
    last = ""
    for block in blocks:
        if out:
            out.append("\n" if _is_item(block) and _is_item(last) else "\n\n")
        out.append(block)
        last = block.rsplit("\n", 1)[-1]
    return "".join(out).strip("\n")


def _is_item(line: str) -> bool:
    stripped = line.lstrip(" ")
    head = stripped.split(" ", 1)[0]
    return head == "•" or (head.endswith(".") and head[:-1].isdigit())
