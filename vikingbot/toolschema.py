"""A tool as the model sees it: name, description and JSON-schema parameters.

Kept below both ``tools`` (which produce schemas) and ``providers`` (which send
them to a model), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolSchema:
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]
