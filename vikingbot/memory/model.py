"""The model call of the memory pass, built from the config at call time."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from vikingbot.providers.base import ChatMessage, ChatRequest
from vikingbot.providers.factory import create_provider

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.memory.consolidate import Complete


def pass_model(config: Config) -> str:
    """``bot.memory.model``, else ``bot.agents.compact_model``, else ``bot.agents.model``."""
    return (
        config.bot.memory.model or config.bot.agents.compact_model or config.bot.agents.model or ""
    )


def provider_call(settings: Callable[[], Config], environ: Mapping[str, str] | None) -> Complete:
    """A ``Complete`` that asks the configured provider (built per pass, then closed)."""

    async def complete(messages: list[ChatMessage]) -> str:
        config = settings()
        provider = create_provider(config, environ=environ)
        try:
            request = ChatRequest(
                model=pass_model(config),
                messages=messages,
                tools=[],
                max_tokens=config.bot.agents.max_tokens,
            )
            return (await provider.complete(request)).text
        finally:
            await provider.aclose()

    return complete
