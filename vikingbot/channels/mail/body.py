"""What a received mail says: its sender, thread headers and new text (pure, total).

:func:`read_mail` takes the raw bytes (possibly cut short: the channel fetches at
most the first MiB of a mail, so a 20 MB attachment is never downloaded) and
always returns a :class:`Mail`; whatever is wrong with the input is a sentence in
``problem``, never an exception. Every step is a scan over lines or characters:
linear in the input.

The new text: the first ``text/plain`` part that is not an attachment (else the
first ``text/html`` part, as text, with ``<blockquote>`` and Gmail's quote ``<div>``
left out), cut at the first reply header (``On ... wrote:``, ``-----Original
Message-----``, Outlook's ``From:``/``Sent:`` block, a line of underscores) and
at the signature line ``-- ``, with ``>``-quoted lines dropped. A reply written
between quoted lines keeps its text.
"""

from __future__ import annotations

import email
import email.errors
import email.header
import email.parser
import itertools
from email.message import Message
from html.parser import HTMLParser
from typing import NamedTuple

from vikingbot.channels.mail.address import clean_subject
from vikingbot.channels.mail.files import MailFile, mail_files
from vikingbot.channels.mail.trust import sender_from

MAX_TEXT_CHARS = 20_000
MAX_REFERENCES = 20
MAX_BYTES = 4 * 1024 * 1024  # more is cut (the channel fetches at most 1 MiB)
MAX_MULTIPARTS = 50  # multipart declarations; bounds the nesting the parser recurses into
MAX_PARTS = 200  # parts looked at for the text
_PARSE_ERRORS = (
    RecursionError,
    ValueError,
    LookupError,
    TypeError,
    AttributeError,
    IndexError,
    AssertionError,
    email.errors.MessageError,
)
_WROTE = ("wrote:", "schrieb:", "a écrit :", "a écrit:", "escribió:", "scrisse:", "schreef:")
_ATTRIBUTION_START = ("On ", "Am ", "Le ", "El ", "Il ", "Op ")


class Mail(NamedTuple):
    """A received mail as the channel needs it. ``problem`` says why it carries no
    usable text (None: ``text`` is what the sender wrote)."""

    sender: str | None
    message_id: str | None
    subject: str
    references: tuple[str, ...]
    text: str
    problem: str | None
    automatic: bool
    files: tuple[MailFile, ...] = ()  # attachments and inline pictures (mail/files.py)
    #: the ``Authentication-Results`` header values, topmost first (raw)
    auth_results: tuple[str, ...] = ()


def _too_nested(raw: bytes) -> str | None:
    """Why ``raw``'s body is not parsed (too many multipart parts), or None."""
    found = raw.lower().count(b"multipart/")
    if found > MAX_MULTIPARTS:
        return f"the mail has more than {MAX_MULTIPARTS} multipart parts ({found})"
    return None


def read_mail(raw: bytes, *, complete: bool = True) -> Mail:
    """The parts of ``raw`` the channel acts on. ``complete`` False: ``raw`` is the start
    of a larger mail (its end, e.g. an attachment, was not fetched). Bounded: at most
    ``MAX_BYTES`` are read, a mail of more than ``MAX_MULTIPARTS`` multipart parts is
    read for its header only, at most ``MAX_PARTS`` parts are looked at."""
    if len(raw) > MAX_BYTES:
        raw, complete = raw[:MAX_BYTES], False
    nested = _too_nested(raw)
    try:
        msg = email.parser.BytesParser().parsebytes(raw, headersonly=nested is not None)
    except _PARSE_ERRORS as exc:
        return Mail(None, None, "", (), "", f"the mail could not be parsed: {exc}", False)
    try:
        return _read(msg, complete, nested)
    except _PARSE_ERRORS as exc:
        return Mail(None, None, "", (), "", f"the mail could not be read: {exc}", False)


def _raw_all(msg: Message, name: str) -> list[str]:
    try:
        return [str(v) for v in msg.get_all(name) or []]
    except _PARSE_ERRORS:
        return []


def _read(msg: Message, complete: bool, nested: str | None) -> Mail:
    sender, why = _sender(msg)
    message_id = _message_id(_header(msg, "Message-ID"))
    subject = clean_subject(_header(msg, "Subject"))
    refs = _references(msg)
    auto = _automatic(msg, sender)
    text, problem = ("", nested) if nested is not None else _new_text(msg)
    files = () if nested is not None else mail_files(msg, complete=complete)
    if why is not None:
        text, problem = "", why
    elif problem is not None and files:
        text, problem = "", None  # the files are the message
    elif problem is None and not complete and not text:
        problem = "the mail's text part lies past the part that was fetched"
    results = tuple(_raw_all(msg, "Authentication-Results")[:20])
    return Mail(sender, message_id, subject, refs, text, problem, auto, files, results)


def _header(msg: Message, name: str) -> str:
    """A header decoded to text (RFC 2047 words), '' when absent or unreadable."""
    try:
        value = msg.get(name)
        if value is None:
            return ""
        parts = email.header.decode_header(str(value))
        return str(email.header.make_header(parts))
    except _PARSE_ERRORS:
        try:
            return str(msg.get(name, ""))
        except _PARSE_ERRORS:
            return ""


def _sender(msg: Message) -> tuple[str | None, str | None]:
    """The From address, read from the raw header before any decoding (trust.py)."""
    found = sender_from(_raw_all(msg, "From"))
    return found.address, found.problem


def _message_id(value: str) -> str | None:
    value = value.strip()
    if not value.startswith("<") or ">" not in value:
        return None
    inner = value[1 : value.index(">")]
    if not inner or len(inner) > 250 or any(c in "<\r\n " or not c.isprintable() for c in inner):
        return None
    return f"<{inner}>"


def _references(msg: Message) -> tuple[str, ...]:
    text = f"{_header(msg, 'References')} {_header(msg, 'In-Reply-To')}"
    found: list[str] = []
    for word in text.replace(">", "> ").split():
        ident = _message_id(word)
        if ident is not None and ident not in found:
            found.append(ident)
    return tuple(found[-MAX_REFERENCES:])


def _automatic(msg: Message, sender: str | None) -> bool:
    """A bounce, an auto-reply or list mail: never answered (mail loops)."""
    auto = _header(msg, "Auto-Submitted").strip().lower()
    if auto and auto != "no":
        return True
    if _header(msg, "Precedence").strip().lower() in ("bulk", "junk", "list", "auto_reply"):
        return True
    if _header(msg, "X-Autoreply") or _header(msg, "X-Autorespond"):
        return True
    try:
        if msg.get_content_type() == "multipart/report":
            return True
    except _PARSE_ERRORS:
        pass
    local = (sender or "").partition("@")[0].lower()
    return local in ("mailer-daemon", "postmaster", "noreply", "no-reply")


# ---------------------------------------------------------------- the text


def _new_text(msg: Message) -> tuple[str, str | None]:
    plain, html = _text_parts(msg)
    if plain is not None:
        text = _strip_quotes(plain)
    elif html is not None:
        text = _strip_quotes(html_to_text(html))
    else:
        return "", "the mail has no text part"
    if not text:
        return "", "the mail has no new text (only quoted lines or a signature)"
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n[… cut at {MAX_TEXT_CHARS} characters]"
    return text, None


def _text_parts(msg: Message) -> tuple[str | None, str | None]:
    plain: str | None = None
    html: str | None = None
    try:
        parts = list(itertools.islice(msg.walk(), MAX_PARTS))
    except _PARSE_ERRORS:
        parts = [msg]
    for part in parts[:MAX_PARTS]:
        try:
            if part.is_multipart():
                continue
            if (part.get_content_disposition() or "") == "attachment":
                continue
            kind = part.get_content_type()
        except _PARSE_ERRORS:
            continue
        if kind == "text/plain" and plain is None:
            plain = _decoded(part)
        elif kind == "text/html" and html is None:
            html = _decoded(part)
    return plain, html


def _decoded(part: Message) -> str:
    try:
        payload = part.get_payload(decode=True)
    except _PARSE_ERRORS:
        payload = None
    if not isinstance(payload, bytes):
        raw = part.get_payload()
        return raw if isinstance(raw, str) else ""
    try:
        charset = part.get_content_charset() or "utf-8"
        return payload.decode(charset, "replace")
    except _PARSE_ERRORS:
        return payload.decode("utf-8", "replace")


def _is_attribution(line: str, following: str) -> bool:
    """``On Mon, 1 Jan 2026, Ann <a@b> wrote:`` (also wrapped over two lines, or any
    ``Am ... :`` line right above a quote)."""
    if not line.startswith(_ATTRIBUTION_START) or len(line) > 300:
        return False
    if line.endswith(_WROTE) or following.endswith(_WROTE):
        return True
    return line.endswith(":") and following.startswith(">")


def _is_reply_header(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    following = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if _is_attribution(line, following):
        return True
    if line.startswith("-----") and "Original Message" in line:
        return True
    if len(line) >= 20 and set(line) == {"_"}:  # Outlook's rule above its header block
        return True
    outlook = line.startswith(("From:", "De:", "Von:"))
    return outlook and following.startswith(("Sent:", "Date:", "Envoyé :", "Gesendet:"))


def _strip_quotes(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        if line in ("-- ", "--") or _is_reply_header(lines, i):
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


class _HtmlText(HTMLParser):
    """Text of an HTML body, without quoted parts, scripts and styles."""

    _SKIP = frozenset({"script", "style", "head", "title"})
    _BREAK = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})
    _VOID = frozenset({"br", "img", "hr", "meta", "link", "input", "area", "base", "col", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.stack: list[bool] = []  # per open element: does it hide its content?

    def _hidden(self) -> bool:
        return any(self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BREAK and not self._hidden():
            self.out.append("\n")
        if tag in self._VOID:
            return
        classes = " ".join(v or "" for k, v in attrs if k == "class")
        hides = tag in self._SKIP or tag == "blockquote" or "gmail_quote" in classes
        self.stack.append(hides)
        if len(self.stack) > 500:  # unbalanced markup: stop tracking, keep reading
            self.stack = [any(self.stack)]

    def handle_endtag(self, tag: str) -> None:
        if self.stack and tag not in self._VOID:
            self.stack.pop()
        if tag in self._BREAK and not self._hidden():
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden():
            self.out.append(data)


def html_to_text(html: str) -> str:
    """An HTML body as plain text (quotes left out); never raises."""
    parser = _HtmlText()
    try:
        parser.feed(html)
        parser.close()
    except _PARSE_ERRORS:
        pass
    lines = "".join(parser.out).split("\n")
    return "\n".join(" ".join(line.split()) for line in lines)
