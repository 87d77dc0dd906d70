"""Config: the JSON file, environment overrides, validation and paths."""

from vikingbot.config.schema import Config, parse_duration

__all__ = ["Config", "parse_duration"]
