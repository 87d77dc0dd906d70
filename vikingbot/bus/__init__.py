"""The bus: typed inbound events from channels, and the outbound message shape."""

from vikingbot.bus.bus import MessageBus
from vikingbot.bus.events import InboundMessage, OutboundMessage

__all__ = ["InboundMessage", "MessageBus", "OutboundMessage"]
