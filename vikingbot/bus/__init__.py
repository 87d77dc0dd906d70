"""The bus: typed inbound events from channels to the agent."""

from vikingbot.bus.bus import MessageBus
from vikingbot.bus.events import Attachment, InboundMessage

__all__ = ["Attachment", "InboundMessage", "MessageBus"]
