"""Sessions: keys, the JSONL session store and the OpenViking import.

Names are re-exported lazily so that importing ``vikingbot.session.types``
(which every service does) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import Message, SessionKey, SessionMeta

__all__ = ["Message", "SessionKey", "SessionMeta", "SessionStore"]


def __getattr__(name: str) -> Any:
    if name == "SessionStore":
        from vikingbot.session.store import SessionStore

        return SessionStore
    if name in ("Message", "SessionKey", "SessionMeta"):
        from vikingbot.session import types

        return getattr(types, name)
    raise AttributeError(f"module 'vikingbot.session' has no attribute {name!r}")
