"""Once per piece of news: the form of a result that two deliveries are compared in.

Pure. ``news_form`` folds what does not change the news (whitespace, case,
markup such as ``**bold**``, ``<b>…</b>``, backticks, headings, list and quote
marks), so "Build **red** since 11:40." and "build red since 11:40" are the same
news, and "Build red since 11:45" is not. Linear in the text; never raises.
"""

from __future__ import annotations

import re

__all__ = ["news_form"]

# an HTML tag (bounded, so a stray "<" costs nothing) or a run of Markdown marks
_MARKUP = re.compile(r"</?[A-Za-z][^<>\n]{0,200}>|[*_`~#>|]+")
# the list marks a line starts with ("- ", "1. ", "- 1) "), or a line that is only one
_LIST_MARKS = re.compile(r"\s*(?:(?:[-+*]|\d{1,9}[.)])(?:\s+|\Z))+")


def news_form(text: str) -> str:
    """``text`` with markup removed, whitespace collapsed and case folded.

    Folding its own result changes nothing: markup goes first (so ``*-* x`` is the list
    item ``- x``), then every list mark a line starts with (lines as ``str.splitlines``
    breaks them, so a ``\\r`` ends a line here as it does for ``split``)."""
    lines = _MARKUP.sub("", text).splitlines()
    bare = (line[m.end() :] if (m := _LIST_MARKS.match(line)) else line for line in lines)
    return " ".join(" ".join(bare).split()).casefold()
