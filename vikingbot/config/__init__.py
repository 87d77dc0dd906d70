"""Config: the JSON file, environment overrides, validation and paths.

Nothing is imported here: `vikingbot status` reads its cached summary through
``vikingbot.config.status_cache`` without loading pydantic. Import the schema
from ``vikingbot.config.schema`` and the loader from ``vikingbot.config.loader``.
"""
