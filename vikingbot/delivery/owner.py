"""Where the owner is: ``bot.owner``, else the first enabled channel's ``owner_chat``.

Pure functions over the config, shared by the channel manager (the owner's chat
is always allowed in) and delivery (results go to the owner by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from loguru import logger

from vikingbot.config.schema import ChannelBase, Config
from vikingbot.errors import DeliveryError


@dataclass(frozen=True)
class OwnerChat:
    channel: str
    chat_id: str
    thread: str | None = None

    def __str__(self) -> str:
        text = f"{self.channel}:{self.chat_id}"
        return f"{text}:{self.thread}" if self.thread else text


def channel_sections(config: Config) -> dict[str, ChannelBase]:
    """Every configured channel section by name, in config order."""
    return config.bot.channels.sections()


def enabled_channels(config: Config) -> list[str]:
    return [name for name, section in channel_sections(config).items() if section.enabled]


def _configured_owner(config: Config) -> OwnerChat | None:
    """``bot.owner`` parsed, or None when unset or unusable (logged)."""
    from vikingbot.delivery.targets import parse_target

    text = config.bot.owner
    if not text:
        return None
    sections = channel_sections(config)
    try:
        target = parse_target(text, known_channels=sections)
    except DeliveryError as exc:
        logger.warning("bot.owner {!r} is not a chat target: {}", text, exc)
        return None
    if target.kind != "channel" or target.channel is None:
        logger.warning("bot.owner {!r} must name a chat, like telegram:12345", text)
        return None
    chat = target.chat_id or sections[target.channel].owner_chat
    if not chat:
        logger.warning("bot.owner {!r} names no chat and channel has no owner_chat", text)
        return None
    return OwnerChat(target.channel, chat, target.thread)


def owner_chat_for(config: Config, channel: str) -> str | None:
    """The owner's chat id on one channel (``bot.owner`` wins over ``owner_chat``)."""
    owner = _configured_owner(config)
    if owner is not None and owner.channel == channel:
        return owner.chat_id
    section = channel_sections(config).get(channel)
    return section.owner_chat if section is not None and section.owner_chat else None


def owner_of(config: Config) -> OwnerChat | None:
    """The owner's chat for delivery, on an enabled channel, or None when there is none.

    An unusable ``bot.owner`` (malformed, or on a disabled channel) is logged and
    the enabled channels' ``owner_chat`` settings are tried instead.
    """
    enabled = enabled_channels(config)
    owner = _configured_owner(config)
    if owner is not None:
        if owner.channel in enabled:
            return owner
        logger.warning("bot.owner is on channel {!r}, which is not enabled", owner.channel)
    sections = channel_sections(config)
    for name in enabled:
        chat = sections[name].owner_chat
        if chat:
            return OwnerChat(name, chat)
    return None
