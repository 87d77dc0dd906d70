"""create_provider: what bot.agents.provider selects, and what it says when unset."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vikingbot.config.schema import Config
from vikingbot.errors import NotConfiguredError
from vikingbot.providers import NO_PROVIDER, create_provider
from vikingbot.providers.anthropic_provider import AnthropicProvider
from vikingbot.providers.command import CommandProvider
from vikingbot.providers.openai_compat import OpenAIProvider


def config(**bot: object) -> Config:
    return Config.model_validate({"bot": bot})


def test_unset_provider_says_exactly_what_to_set() -> None:
    with pytest.raises(NotConfiguredError) as exc:
        create_provider(config())
    assert str(exc.value) == NO_PROVIDER
    assert "vikingbot config set bot.agents.provider openai" in str(exc.value)


def test_kind_defaults_to_the_section_name() -> None:
    cfg = config(agents={"provider": "anthropic"}, providers={"anthropic": {"apiKey": "k"}})
    p = create_provider(cfg, environ={})
    assert isinstance(p, AnthropicProvider)
    assert p.api_key() == "k"


def test_a_named_section_with_its_own_kind() -> None:
    cfg = config(
        agents={"provider": "ollama"},
        providers={"ollama": {"kind": "openai", "apiBase": "http://127.0.0.1:11434/v1"}},
    )
    p = create_provider(cfg, environ={})
    assert isinstance(p, OpenAIProvider)
    assert p.name == "ollama"
    assert p.base_url == "http://127.0.0.1:11434/v1"


def test_a_bare_kind_without_a_section() -> None:
    assert isinstance(create_provider(config(agents={"provider": "command"})), CommandProvider)


def test_unknown_names_are_refused_when_the_config_is_loaded() -> None:
    with pytest.raises(ValidationError, match=r"neither a section of bot\.providers") as info:
        config(agents={"provider": "gemini"})
    assert "valid provider kinds: anthropic, command, openai" in str(info.value)
    with pytest.raises(ValidationError, match=r"bot.providers.x.kind is 'nope'"):
        config(agents={"provider": "x"}, providers={"x": {"kind": "nope"}})
    with pytest.raises(ValidationError, match=r"unknown agent loop 'acpx'; valid loops: .*builtin"):
        config(agents={"loop": "acpx"})


def test_a_config_built_in_code_is_still_checked_when_the_provider_is_made() -> None:
    cfg = config()
    cfg.bot.agents.provider = "gemini"  # assignment skips validation
    with pytest.raises(NotConfiguredError, match=r"neither a section of bot\.providers"):
        create_provider(cfg)
