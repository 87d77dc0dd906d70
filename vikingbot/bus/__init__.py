"""The bus: typed inbound/outbound events between channels and the agent."""

from vikingbot.bus.bus import MessageBus
from vikingbot.bus.events import InboundMessage, OutboundMessage

__all__ = ["InboundMessage", "MessageBus", "OutboundMessage"]
