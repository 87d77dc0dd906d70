"""The OpenAI-compatible streaming call: chunks in, one ``ProviderResponse`` out.

Kept apart from ``openai_compat.complete`` (the non-streamed call every other path
uses): only a chat whose channel shows live replies streams. The text handed to
``on_text`` piece by piece adds up to exactly the response's ``text``; tool calls
are assembled from their indexed deltas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vikingbot.providers.base import ProviderResponse, ToolCall


async def collect(
    client: Any,
    params: dict[str, Any],
    on_text: Callable[[str], None],
    parse_arguments: Callable[[str | None], dict[str, Any]],
) -> ProviderResponse:
    """Run the streamed completion ``params`` and assemble its answer (a tool call's
    arguments read by ``parse_arguments``, as the non-streamed call reads them)."""
    stream = await client.chat.completions.create(
        **params, stream=True, stream_options={"include_usage": True}
    )
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    tokens_in = tokens_out = 0
    finish = "stop"
    async for chunk in stream:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            tokens_in, tokens_out = usage.prompt_tokens or 0, usage.completion_tokens or 0
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                on_text(delta.content)
            for tc in (delta.tool_calls if delta is not None else None) or []:
                slot = calls.setdefault(int(tc.index or 0), {"id": "", "name": "", "args": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["args"] += tc.function.arguments or ""
            if choice.finish_reason:
                finish = choice.finish_reason
    return ProviderResponse(
        text="".join(text),
        tool_calls=[
            ToolCall(c["id"], c["name"], parse_arguments(c["args"]))
            for _, c in sorted(calls.items())
        ],
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        finish_reason=finish,
    )
