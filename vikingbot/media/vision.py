"""Does the configured model see images? (``bot.agents.vision``; pure)."""

from __future__ import annotations

import re

from vikingbot.config.schema import Config

# Models that take images, matched in the model name (case-insensitive). docs/media.md
# lists them; a model not here needs ``bot.agents.vision: on``.
VISION_MODELS = (
    r"gpt-4o",
    r"gpt-4\.1",
    r"gpt-4-turbo",
    r"gpt-5",
    r"\bo[134]\b",
    r"\bo[34]-",
    r"claude-3",
    r"claude-(sonnet|opus|haiku)-4",
    r"claude-(sonnet|opus|haiku)-[5-9]",
    r"gemini",
    r"gemma-?3",
    r"llava",
    r"bakllava",
    r"vision",
    r"-vl\b",
    r"-vl-",
    r"qwen.*vl",
    r"pixtral",
    r"minicpm-v",
    r"moondream",
    r"grok-.*vision",
    r"mistral-(small|medium)-3",
)
_VISION = re.compile("|".join(VISION_MODELS), re.IGNORECASE)


def sees_images(config: Config, model: str | None = None) -> bool:
    """Whether images go to the model: ``on``/``off`` as set; ``auto`` by the model's name
    (an ACP agent: off under ``auto``, since vikingbot cannot tell what it runs)."""
    agents = config.bot.agents
    if agents.vision != "auto":
        return agents.vision == "on"
    if agents.loop != "builtin":
        return False
    name = (model or agents.model or "")[:200]
    return bool(_VISION.search(name))
