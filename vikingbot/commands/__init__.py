"""Chat commands (``/new``, ``/model``, ``/approve``...) answered without the model, and the
approval questions asked in chats: one registry for the terminal and every chat channel."""

from vikingbot.commands.approvals import Approvals, Pending
from vikingbot.commands.builtin import registry
from vikingbot.commands.registry import Command, Invocation, Registry, parse, yes_or_no
from vikingbot.commands.types import CommandCall, Desk

__all__ = [
    "Approvals",
    "Command",
    "CommandCall",
    "Desk",
    "Invocation",
    "Pending",
    "Registry",
    "parse",
    "registry",
    "yes_or_no",
]
