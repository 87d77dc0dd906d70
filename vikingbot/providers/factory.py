"""Pick the configured provider: ``bot.agents.provider`` -> a constructed provider.

``bot.agents.provider`` names a section of ``bot.providers`` (whose ``kind``
defaults to the section name) or, with no such section, a registered provider
kind used with default settings. The class comes from the provider registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vikingbot import registry
from vikingbot.config.schema import ProviderConfig
from vikingbot.errors import NotConfiguredError

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.providers.base import Provider

NO_PROVIDER = (
    "no model provider configured: set bot.agents.provider (openai, anthropic or command) "
    "and bot.agents.model, e.g. vikingbot config set bot.agents.provider openai"
)


def create_provider(
    config: Config, environ: Mapping[str, str] | None = None, name: str | None = None
) -> Provider:
    """Construct the provider ``name`` names (default ``bot.agents.provider``: a section of
    ``bot.providers`` or a kind); ``NotConfiguredError`` if none."""
    name = name or config.bot.agents.provider
    if not name:
        raise NotConfiguredError(NO_PROVIDER)
    section = config.bot.providers.get(name)
    kind = (section.kind if section else None) or name
    known = registry.names("providers")
    if kind not in known:
        sections = ", ".join(sorted(config.bot.providers)) or "none"
        if section is None:
            raise NotConfiguredError(
                f"the provider {name!r} is neither a section of bot.providers "
                f"(configured: {sections}) nor a provider kind (known: {', '.join(known)})"
            )
        raise NotConfiguredError(
            f"bot.providers.{name}.kind is {kind!r}, which is not a provider kind "
            f"(known: {', '.join(known)})"
        )
    cls = registry.load("providers", kind)
    provider: Provider = cls(name, section or ProviderConfig(), environ=environ)
    return provider
