"""vikingbot: a personal AI agent bot with a heartbeat."""

__version__ = "0.1.0"
