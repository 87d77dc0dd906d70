"""Live text of a turn: where a streaming provider's words go while the model writes.

Whoever starts an attended turn may set ``TURN_STREAM`` to a :class:`TextSink` (the
gateway does for a chat whose channel shows live replies). The built-in loop then
asks a provider that can stream (:class:`StreamingProvider`) to do so, calling
``begin()`` at each model call, ``delta(text)`` for each piece of text and
``tool(name)`` as each tool call starts. The
reply itself is unchanged: what the sink saw is only a preview; the final text is
delivered as before (and replaces the preview where the channel can edit).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from vikingbot.providers.base import ChatRequest, ProviderResponse


class TextSink(Protocol):
    def begin(self) -> None:
        """A model call starts: the preview starts again from nothing."""

    def delta(self, text: str) -> None:
        """More text of the current model call."""

    def tool(self, name: str) -> None:
        """A tool starts running (a short line in the preview)."""


@runtime_checkable
class StreamingProvider(Protocol):
    """A provider that can hand over the reply's text as it is written."""

    async def stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ProviderResponse: ...


TURN_STREAM: ContextVar[TextSink | None] = ContextVar("turn_stream", default=None)
