"""The front matter of a ``SKILL.md``: a strict subset of YAML, read totally and in linear time.

``split(text)`` returns the top-level ``key: value`` pairs (every value as text), the body and
the problems found; it never raises, whatever the text (the agent can write workspace skills).
What it reads, it reads as YAML would:

- ``key: plain text`` (a `` #`` starts a comment; indented lines below continue the value,
  joined with spaces), ``key: 'single'`` and ``key: "double"`` quoted on one line, the block
  scalars ``key: |`` (lines kept) and ``key: >`` (lines folded), with ``-``/``+`` chomping;
- a nested block (``metadata:`` with indented lines below, a ``- item`` list) or a one-line
  flow collection (``[a, b]``) is kept as its text: vikingbot uses only ``name`` and
  ``description``, and shows the rest.

What YAML allows beyond that (anchors, aliases, tags, quoted keys, a quote spanning lines) is
a problem naming the line, never a guess. One liberty: a plain value may hold ``: ``
(``description: Use when: the user asks``), which YAML refuses; it is read as text.
The front matter is at most ``MAX_LINES`` lines of at most ``MAX_CHARS`` characters in all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LINES = 400
MAX_CHARS = 64 * 1024
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_UNSUPPORTED = {"&": "an anchor", "*": "an alias", "!": "a tag", "%": "a directive", "@": "@"}
_UNSUPPORTED["`"] = "a backquote"
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "r": "\r", "0": "\0", " ": " "}


@dataclass
class FrontMatter:
    """What ``split`` found: fields in order, the body after the front matter, and problems.

    ``body_line`` is the 1-based line of the file where the body starts."""

    fields: dict[str, str] = field(default_factory=dict)
    body: str = ""
    body_line: int = 1
    problems: list[str] = field(default_factory=list)
    found: bool = False  # the file starts with a closed front matter


def split(text: str) -> FrontMatter:
    """The front matter and body of ``text`` (a SKILL.md, BOM already removed). Total."""
    out = FrontMatter(body=text)
    lines = _head_lines(text)
    if not lines or lines[0].rstrip() != "---":
        out.problems.append(
            "no front matter: SKILL.md must start with a line '---', then 'name:' and "
            "'description:' lines, then '---'"
        )
        return out
    end = _closing(lines)
    if end is None:
        out.problems.append(
            f"the front matter is not closed by a '---' line within {MAX_LINES} lines "
            f"and {MAX_CHARS} characters"
        )
        return out
    out.found = True
    out.body_line = end + 2
    consumed = sum(len(line) for line in lines[: end + 1])
    out.body = text[consumed:]
    _Reader(lines[1:end], out).read()
    return out


def _head_lines(text: str) -> list[str]:
    """At most ``MAX_LINES + 1`` lines (with their endings) of the first ``MAX_CHARS``."""
    return text[:MAX_CHARS].splitlines(keepends=True)[: MAX_LINES + 1]


def _closing(lines: list[str]) -> int | None:
    for i in range(1, len(lines)):
        stripped = lines[i].rstrip()
        if stripped in ("---", "..."):
            if i == len(lines) - 1 and not lines[i].endswith(("\n", "\r")):
                # a '---' cut off by the cap may be the start of a longer line
                return i if len(lines[i]) < MAX_CHARS else None
            return i
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Reader:
    """Reads the lines between the two ``---`` (line 2 of the file is ``lines[0]``)."""

    def __init__(self, lines: list[str], out: FrontMatter) -> None:
        self.lines = [line.rstrip("\r\n") for line in lines]
        self.out = out
        self.i = 0

    def problem(self, message: str, index: int | None = None) -> None:
        line = (self.i if index is None else index) + 2
        self.out.problems.append(f"front matter line {line}: {message}")

    def read(self) -> None:
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line.strip() or line.lstrip().startswith("#"):
                self.i += 1
                continue
            if _indent(line):
                self.problem("an indented line that belongs to no key")
                self.i += 1
                continue
            self._pair(line)

    def _pair(self, line: str) -> None:
        colon = line.find(":")
        key = line[:colon] if colon > 0 else ""
        if not _KEY.fullmatch(key) or (colon + 1 < len(line) and line[colon + 1] not in " \t"):
            self.problem(f"expected 'key: value', got {_short(line)!r}")
            self.i += 1
            return
        start = self.i
        value = self._value(line[colon + 1 :].strip())
        if key in self.out.fields:
            self.problem(f"{key}: is given twice", start)
            return
        if value is not None:
            self.out.fields[key] = value

    def _more(self) -> list[str]:
        """The indented (or blank) lines after the current one, consumed; trailing blanks kept
        for the next key."""
        j = self.i + 1
        last = self.i
        while j < len(self.lines) and (not self.lines[j].strip() or _indent(self.lines[j])):
            if self.lines[j].strip():
                last = j
            j += 1
        block = self.lines[self.i + 1 : last + 1]
        self.i = last + 1
        return block

    def _value(self, raw: str) -> str | None:
        head = raw[:1]
        if head in _UNSUPPORTED:
            self.problem(f"{_UNSUPPORTED[head]} ({_short(raw)!r}) is not read; write plain text")
            self._more()
            return None
        if head in ("|", ">") and _BLOCK.fullmatch(raw.split(" #", 1)[0].strip()):
            return _block(self._more(), raw)
        if head in ("'", '"'):
            return self._quoted(raw)
        if head in ("[", "{"):
            closing = "]" if head == "[" else "}"
            if not raw.split(" #", 1)[0].rstrip().endswith(closing):
                self.problem(f"a list or map written with {head} must close on the same line")
                self._more()
                return None
            self.i += 1
            return raw
        plain = _uncomment(raw)
        more = self._more()
        if not plain and more:  # a nested block: kept as its text
            return "\n".join(line.strip() for line in more if line.strip())
        words = [plain, *(_uncomment(line.strip()) for line in more if line.strip())]
        return " ".join(w for w in words if w)

    def _quoted(self, raw: str) -> str | None:
        quote = raw[0]
        value, rest = (_single(raw) if quote == "'" else _double(raw)) or (None, "")
        if value is None:
            self.problem(f"a {quote}-quoted value must close on its own line")
            self._more()
            return None
        if rest.strip() and not rest.strip().startswith("#"):
            self.problem(f"text after the closing quote: {_short(rest.strip())!r}")
        self.i += 1
        return value


_BLOCK = re.compile(r"[|>][-+]?[1-9]?|[|>][1-9][-+]")


def _uncomment(text: str) -> str:
    cut = text.find(" #")
    if text.startswith("#"):
        return ""
    return (text[:cut] if cut >= 0 else text).strip()


def _block(lines: list[str], header: str) -> str:
    """A ``|`` or ``>`` block scalar's text from its indented lines."""
    indents = [_indent(line) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    body = [line[cut:] if line.strip() else "" for line in lines]
    text = "\n".join(body) if header[0] == "|" else _fold(body)
    text = text.rstrip("\n")
    chomp = "-" if "-" in header else ("+" if "+" in header else "")
    return text if chomp == "-" else text + "\n" if text else text


def _fold(lines: list[str]) -> str:
    """YAML folding: neighbouring lines joined by a space, a blank line a line break, and
    more-indented lines kept on lines of their own."""
    out = ""
    prev = "start"  # start, blank, text, indented
    for line in lines:
        if not line:
            out += "\n"
            prev = "blank"
        elif line.startswith((" ", "\t")) or prev == "indented":
            out += ("\n" if prev in ("text", "indented") else "") + line
            prev = "indented" if line.startswith((" ", "\t")) else "text"
        else:
            out += (" " if prev == "text" else "") + line
            prev = "text"
    return out


def _single(raw: str) -> tuple[str, str] | None:
    out: list[str] = []
    i = 1
    while i < len(raw):
        c = raw[i]
        if c == "'":
            if raw[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), raw[i + 1 :]
        out.append(c)
        i += 1
    return None


def _double(raw: str) -> tuple[str, str] | None:
    out: list[str] = []
    i = 1
    while i < len(raw):
        c = raw[i]
        if c == '"':
            return "".join(out), raw[i + 1 :]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt == "u" and _hex(raw[i + 2 : i + 6]):
                point = int(raw[i + 2 : i + 6], 16)
                # a lone surrogate is no character: kept as written, never sent to a model
                out.append(raw[i : i + 6] if 0xD800 <= point <= 0xDFFF else chr(point))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return None


def _hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
