"""How a chat shows an approval question: the words, and what its buttons send back.

A channel with buttons (Telegram's inline keyboard) shows two, whose data is the
command they stand for (``/approve <id>``, ``/deny <id>``): a press comes back as
that command from the person who pressed, through the same allow-list and the
same answer rules as typed text. A channel without buttons shows
:func:`text_form`, answered by a reply ("yes", "no", or the commands).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """An approval question for one chat: ``id`` names it in ``/approve <id>``."""

    id: str
    tool: str
    preview: str  # the arguments, masked and capped
    timeout_s: float

    @property
    def approve(self) -> str:
        return f"/approve {self.id}"

    @property
    def deny(self) -> str:
        return f"/deny {self.id}"

    def headline(self) -> str:
        return f"Allow {self.tool}?\n{self.preview}"

    def deadline(self) -> str:
        minutes = max(1, round(self.timeout_s / 60))
        return f"No answer within {minutes} min denies it."


def text_form(q: Question) -> str:
    """The question as plain text, for a channel without buttons."""
    return f'{q.headline()}\nReply "yes" or "no" (or {q.approve} / {q.deny}). {q.deadline()}'


def button_form(q: Question) -> str:
    """The question's text above its buttons."""
    return f"{q.headline()}\n{q.deadline()}"
