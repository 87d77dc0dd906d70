"""Errors the control API answers with a status of their own."""

from __future__ import annotations

from vikingbot.errors import VikingbotError


class BadRequest(VikingbotError):
    """A control request the gateway cannot act on (answered 400)."""


class NotFound(VikingbotError):
    """The thing a control request names does not exist (answered 404)."""
