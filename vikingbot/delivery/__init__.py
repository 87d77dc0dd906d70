"""Delivery: targets, the outbox, the inbox, and the service that ties them together.

Owns where results go (``owner``, ``last``, chats, the dashboard inbox), that
untrusted targets are refused and audited, and that a result is sent once and
never lost silently.
"""

from vikingbot.delivery.targets import Target, parse_target
from vikingbot.delivery.types import DeliveryReport, Destination, Resolution

__all__ = ["DeliveryReport", "Destination", "Resolution", "Target", "parse_target"]
