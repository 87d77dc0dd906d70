"""Column types the state database needs on every backend.

SQLite has no timezone-aware timestamp: SQLAlchemy's ``DateTime(timezone=True)``
silently drops the offset there and hands back naive datetimes, while PostgreSQL
returns aware ones. ``UtcDateTime`` makes both backends behave the same: values
are converted to UTC on the way in (naive values are refused) and come back
timezone-aware in UTC, so comparisons and ordering work everywhere.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}: {value!r}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"naive datetime {value.isoformat()} refused: the state database stores "
                "timezone-aware times (use Clock.now() or datetime.now(UTC))"
            )
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
