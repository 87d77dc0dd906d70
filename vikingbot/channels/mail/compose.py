"""An outgoing mail: headers checked, Markdown as text plus HTML, a stable Message-ID (pure).

The Message-ID comes from the outbox row's ``dedupe_key``: a mail sent again after
a crash carries the same id, so a mail client shows it once.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from functools import cache
from typing import TYPE_CHECKING

from vikingbot.channels.mail.address import check_address, clean_subject

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


def message_id_for(key: str, sender: str) -> str:
    """The Message-ID of the mail sent for outbox key ``key`` from ``sender``."""
    digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:32]
    return f"<vikingbot.{digest}@{sender.rpartition('@')[2]}>"


@cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # raw HTML in the text is shown as text; javascript:/data: links are refused by
    # markdown-it's own link check
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def to_html(markdown: str) -> str:
    """The agent's Markdown as a small HTML document."""
    body = _markdown().render(markdown)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
        f'<body style="font-family:sans-serif;line-height:1.4">{body}</body></html>'
    )


def compose(
    *,
    sender: str,
    to: str,
    subject: str,
    text: str,
    key: str,
    when: datetime,
    in_reply_to: str | None = None,
    references: tuple[str, ...] = (),
    sender_name: str = "",
) -> EmailMessage:
    """The mail for one outbox row; raises :class:`ChannelRejected` for a bad address."""
    msg = EmailMessage()
    sender = check_address(sender, "sender address")
    name = clean_subject(sender_name).replace('"', "'")
    msg["From"] = f'"{name}" <{sender}>' if name else sender
    msg["To"] = check_address(to, "recipient address")
    msg["Subject"] = clean_subject(subject) or "(no subject)"
    msg["Date"] = format_datetime(when)
    msg["Message-ID"] = message_id_for(key, sender)
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        chain = [r for r in references if r != in_reply_to] + [in_reply_to]
        msg["References"] = " ".join(chain[-20:])
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no auto-replies to us
    msg["X-Vikingbot-Key"] = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:32]
    msg.set_content(text)
    msg.add_alternative(to_html(text), subtype="html")
    return msg
