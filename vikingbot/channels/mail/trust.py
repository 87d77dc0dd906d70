"""Who sent a mail, and whether the receiving mail server vouches for it (pure, total).

:func:`sender_from` reads the ``From`` header as it came over the wire (RFC 5322),
before any RFC 2047 decoding: the one address outside the display name is the
sender. A header with several addresses, or whose display name (decoded) holds an
address other than that one, names no sender we believe.

:func:`verdict_from` reads the receiving server's ``Authentication-Results``
(RFC 8601). Only the **topmost** ``Authentication-Results`` header counts, and only
when its authserv-id is the configured one (compared case-insensitively, as a whole:
``mx.example.org`` does not match ``evil-mx.example.org`` nor ``mx.example.org.evil``).
A receiving server adds its header on top of the mail; anything lower down may have
been written by the sender. The mail passes when that header says ``dmarc=pass``
(with ``header.from`` the From domain, when given) or ``dkim=pass`` for a signing
domain (``header.d``) aligned with the From domain: the same domain, or a parent of it
that has a dot in it (relaxed alignment without the public-suffix list).

Every function returns a reason a user can read; none raises, all are linear.
"""

from __future__ import annotations

import email.errors
import email.header
import re
from typing import NamedTuple

from vikingbot.channels.mail.address import check_address
from vikingbot.errors import ChannelRejected

MAX_HEADER_CHARS = 4096
_ANY_ADDRESS = re.compile(r"[^\s<>()\",;:@]+@[^\s<>()\",;:@]+")


class Sender(NamedTuple):
    """The address a ``From`` header names (None) and why it is not believed."""

    address: str | None
    problem: str | None


def _scan(raw: str) -> tuple[list[str], list[str], str | None]:
    """Split a raw ``From`` value into (addresses in angle brackets or bare, display
    text, problem). Quoted strings and comments are display text; commas outside
    them separate mailboxes. One pass over the characters."""
    mailboxes: list[tuple[list[str], list[str]]] = [([], [])]
    addr_chars: list[str] | None = None
    quoted = escaped = False
    depth = 0
    word: list[str] = []

    def end_word() -> None:
        if word:
            mailboxes[-1][1].append("".join(word))
            word.clear()

    for ch in raw:
        if escaped:
            (addr_chars if addr_chars is not None else word).append(ch)
            escaped = False
        elif ch == "\\" and (quoted or depth):
            escaped = True
        elif quoted:
            if ch == '"':
                quoted = False
                end_word()
            else:
                word.append(ch)
        elif depth:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    end_word()
            else:
                word.append(ch)
        elif addr_chars is not None:
            if ch == ">":
                mailboxes[-1][0].append("".join(addr_chars))
                addr_chars = None
            elif ch == "<":
                return [], [], "an address in the From header holds a '<'"
            else:
                addr_chars.append(ch)
        elif ch == '"':
            end_word()
            quoted = True
        elif ch == "(":
            end_word()
            depth = 1
        elif ch == "<":
            end_word()
            addr_chars = []
        elif ch == ",":
            end_word()
            mailboxes.append(([], []))
        elif ch.isspace():
            end_word()
        else:
            word.append(ch)
    if quoted or depth or addr_chars is not None:
        return [], [], "the From header has an unclosed quote, comment or '<'"
    end_word()
    named = [m for m in mailboxes if m[0] or m[1]]
    if len(named) != 1:
        return [], [], f"the From header names {len(named)} addresses, not one"
    angle, words = named[0]
    if len(angle) > 1:
        return [], [], f"the From header holds {len(angle)} addresses in angle brackets"
    if angle:
        return angle, words, None
    # no angle brackets: the word with an '@' is the address (``ann@example.org (Ann)``)
    bare = [w for w in words if "@" in w]
    if len(bare) != 1:
        return (
            [],
            [],
            f"the From header is not a plain address like name@example.org ({len(bare)} found)",
        )
    return bare, [w for w in words if w is not bare[0]], None


def _decoded(text: str) -> str:
    """A display name with its RFC 2047 words decoded ('' where they are broken)."""
    try:
        return str(email.header.make_header(email.header.decode_header(text)))
    except (ValueError, LookupError, TypeError, UnicodeError, email.errors.HeaderParseError):
        return ""


def sender_from(raw_values: list[str]) -> Sender:
    """The sender named by the raw ``From`` header(s) of a mail (as received)."""
    if not raw_values:
        return Sender(None, "the mail has no From address")
    if len(raw_values) > 1:
        return Sender(None, f"the mail has {len(raw_values)} From headers")
    raw = raw_values[0]
    if len(raw) > MAX_HEADER_CHARS:
        return Sender(None, f"the From header is longer than {MAX_HEADER_CHARS} characters")
    addresses, words, problem = _scan(raw.replace("\r", " ").replace("\n", " "))
    if problem is not None:
        return Sender(None, problem)
    if not addresses:
        return Sender(None, "the From header names no address")
    if "=?" in addresses[0]:
        return Sender(None, "the From address is an encoded word, not an address")
    try:
        address = check_address(addresses[0], "From address")
    except ChannelRejected as exc:
        return Sender(None, str(exc))
    for text in (" ".join(words), _decoded(" ".join(words))):
        for other in _ANY_ADDRESS.findall(text[:MAX_HEADER_CHARS]):
            if other.strip(".'").casefold() != address.casefold():
                return Sender(
                    None,
                    f"the From header's display name holds another address ({other!r}) "
                    f"than its real one ({address})",
                )
    return Sender(address, None)


# ---------------------------------------------------------------- Authentication-Results


class Verdict(NamedTuple):
    """Whether the receiving server vouches for the From domain, and what it said."""

    passed: bool
    reason: str


_RESULT = re.compile(r"(?<![\w.-])(dmarc|dkim)\s*=\s*([a-z]+)", re.IGNORECASE)
_PROP = re.compile(r"(?<![\w.-])header\.(d|from|i)\s*=\s*([^\s;]+)", re.IGNORECASE)


def _strip_comments(text: str) -> str:
    out: list[str] = []
    depth = 0
    quoted = False
    for ch in text:
        if quoted:
            quoted = ch != '"'
            out.append(ch)
        elif ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif not depth:
            quoted = ch == '"'
            out.append(ch)
    return "".join(out)


def _aligned(signer: str, domain: str) -> bool:
    signer = signer.strip().strip('"').lstrip("@").rstrip(".").casefold()
    if "@" in signer:  # header.i=user@domain
        signer = signer.rpartition("@")[2]
    return signer == domain or ("." in signer and domain.endswith("." + signer))


def verdict_from(raw_results: list[str], authserv_id: str, from_domain: str) -> Verdict:
    """What the topmost of ``raw_results`` (the mail's ``Authentication-Results`` values,
    top first) says about ``from_domain``, if ``authserv_id`` wrote it."""
    if not raw_results:
        return Verdict(False, "the mail has no Authentication-Results header")
    top = _strip_comments(raw_results[0][:MAX_HEADER_CHARS].replace("\r", " ").replace("\n", " "))
    ident, _, rest = top.partition(";")
    ident_words = ident.split()
    said = ident_words[0].strip('"').casefold() if ident_words else ""
    if said != authserv_id.casefold():
        return Verdict(
            False,
            f"the topmost Authentication-Results is from {said!r}, not {authserv_id!r}",
        )
    domain = from_domain.casefold()
    heard: list[str] = []
    for clause in rest.split(";"):
        found = _RESULT.search(clause)
        if found is None:
            continue
        method, result = found.group(1).lower(), found.group(2).lower()
        props = {k.lower(): v.strip('"').casefold() for k, v in _PROP.findall(clause)}
        heard.append(f"{method}={result}")
        if result != "pass":
            continue
        if method == "dmarc" and props.get("from", domain) == domain:
            return Verdict(True, f"{authserv_id}: dmarc=pass for {domain}")
        signer = props.get("d") or props.get("i")
        if method == "dkim" and signer is not None and _aligned(signer, domain):
            return Verdict(True, f"{authserv_id}: dkim=pass by {signer} (aligned with {domain})")
    said_text = ", ".join(heard[:6]) or "no dmarc or dkim result"
    return Verdict(False, f"{authserv_id} did not vouch for {domain} ({said_text})")
