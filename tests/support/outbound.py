"""Send a message to a channel manager the only way the gateway can: through delivery.

The channel manager takes only a sealed ``Outgoing`` that the delivery service made,
so channel tests send a chat reply through a real ``DeliveryService`` whose sink is
the manager (what the gateway wires), never around it.
"""

from __future__ import annotations

from pathlib import Path

from vikingbot.channels.manager import ChannelManager
from vikingbot.delivery.service import DeliveryService
from vikingbot.delivery.types import OutboundMessage
from vikingbot.session.store import SessionStore
from vikingbot.session.types import SessionKey


def delivery_for(manager: ChannelManager, sessions_dir: Path | None = None) -> DeliveryService:
    """A delivery service sending to ``manager`` (sessions are only read for ``last``/``all``)."""
    sessions = SessionStore(sessions_dir or Path("/nonexistent/vikingbot-sessions"))
    return DeliveryService(
        manager.config,
        store=manager.store,
        sessions=sessions,
        clock=manager.clock,
        sink=manager.send,
    )


async def send_reply(manager: ChannelManager, msg: OutboundMessage) -> bool:
    """Send ``msg`` as a reply in its own chat; True when the platform took it."""
    status = await delivery_for(manager).reply(
        SessionKey(msg.channel, msg.channel_id, msg.chat_id),
        msg.text,
        thread=msg.thread,
        dedupe_key=msg.dedupe_key,
    )
    return status == "delivered"
