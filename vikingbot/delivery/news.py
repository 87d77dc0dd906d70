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
_LIST_MARK = re.compile(r"^[ \t]*(?:[-+*]|\d{1,9}[.)])[ \t]+", re.MULTILINE)


def news_form(text: str) -> str:
    """``text`` with markup removed, whitespace collapsed and case folded."""
    text = _LIST_MARK.sub(" ", text)
    return " ".join(_MARKUP.sub("", text).split()).casefold()
