"""What an API turn says, as it says it: the answer of ``/v1/chat/completions``.

A :class:`Transcript` is the turn's :class:`~vikingbot.agent.streaming.TextSink`
(``TURN_STREAM``) and also receives what the agent sends to "this chat" while the
turn runs. Its parts, in the order the turn produced them, are: the text of each
streamed model call (the text a model writes before asking for a tool included, as
a client has already seen it), each message sent to this chat, and the final reply
when the provider did not stream it. :meth:`Transcript.text` joins the non-blank
parts with a blank line; that is the answer, streamed or not.

``emit`` receives the answer as it grows: the pieces, joined, are always exactly
``text()`` so far (a part that is only whitespace so far is held back until it has
words, and the blank line between parts is sent with the next part's first words).
``on_tool`` hears each tool as it starts (the route shows it as an SSE comment,
which clients ignore; it is not part of the answer). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable

SEPARATOR = "\n\n"


class Transcript:
    def __init__(
        self,
        emit: Callable[[str], None] | None = None,
        on_tool: Callable[[str], None] | None = None,
    ) -> None:
        self._emit = emit
        self._on_tool = on_tool
        self._parts: list[list[str]] = []  # each part's pieces
        self._words: list[bool] = []  # whether each part has more than whitespace
        self._spoken = False  # some earlier part has words (the next one needs a separator)
        self._model_open = False  # the last part is a model call still writing (or last)
        self._closed = False
        self.tools: list[str] = []

    # TextSink -------------------------------------------------------------
    def begin(self) -> None:
        if self._closed:
            return
        self._new_part()
        self._model_open = True

    def delta(self, text: str) -> None:
        if self._closed or not text:
            return
        if not self._model_open:
            self.begin()
        self._add(text)

    def tool(self, name: str) -> None:
        if self._closed:
            return
        self._model_open = False
        self.tools.append(name)
        if self._on_tool is not None:
            self._on_tool(name)

    # the rest of the turn --------------------------------------------------
    def said(self, text: str) -> None:
        """The agent sent ``text`` to this chat (a message tool): a part of its own."""
        if self._closed:
            return
        self._model_open = False
        self._new_part()
        self._add(text)

    def finish(self, final: str | None) -> str:
        """The turn ended with the reply ``final``: added as the last part unless the
        provider streamed it already (then what was streamed stands). The answer."""
        if not self._closed:
            if not self._model_open and final:
                self._new_part()
                self._add(final)
            self._closed = True
        return self.text()

    def text(self) -> str:
        return SEPARATOR.join(
            "".join(p) for p, w in zip(self._parts, self._words, strict=True) if w
        )

    # ----------------------------------------------------------------------
    def _new_part(self) -> None:
        if self._words and self._words[-1]:
            self._spoken = True
        self._parts.append([])
        self._words.append(False)

    def _add(self, text: str) -> None:
        self._parts[-1].append(text)
        if self._words[-1]:
            self._send(text)
        elif text.strip():  # the part's first words: with what it held, after a separator
            self._words[-1] = True
            self._send((SEPARATOR if self._spoken else "") + "".join(self._parts[-1]))

    def _send(self, piece: str) -> None:
        if self._emit is not None:
            self._emit(piece)
