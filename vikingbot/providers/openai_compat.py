"""The ``openai`` provider kind: any OpenAI-compatible chat-completions endpoint.

OpenAI itself, Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Volcengine Ark...
through the official ``openai`` SDK with ``api_base`` as the base URL. The SDK
retries 408/409/429/5xx and dropped connections with exponential backoff
(honouring ``Retry-After``) up to ``max_retries``; its errors are converted here
into ``vikingbot.errors`` types whose message says what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vikingbot.errors import ProviderError
from vikingbot.providers.base import (
    INVALID_ARGUMENTS,
    BaseProvider,
    ChatMessage,
    ChatRequest,
    ProviderResponse,
    ToolCall,
    error_detail,
    malformed_error,
    status_error,
    unreachable_error,
)

if TYPE_CHECKING:
    from vikingbot.config.schema import ProviderConfig

OPENAI_BASE = "https://api.openai.com/v1"


def to_wire_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages -> chat-completions ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
            parts += [{"type": "image_url", "image_url": {"url": i.data_url()}} for i in m.images]
            out.append({"role": m.role, "content": parts})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """The model's JSON arguments as a dict; unparseable text is kept under ``INVALID_ARGUMENTS``."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {INVALID_ARGUMENTS: raw}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS: raw}


class OpenAIProvider(BaseProvider):
    kind = "openai"
    key_env = "OPENAI_API_KEY"
    sdk = "openai"

    def __init__(
        self, name: str, config: ProviderConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(name, config, environ=environ)
        self.base_url = (config.api_base or OPENAI_BASE).rstrip("/")
        self._client: Any = None

    def _make_client(self) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(
            api_key=self.client_key(),
            base_url=self.base_url,
            timeout=self.config.timeout_s,
            max_retries=self.config.max_retries,
        )

    def warm_up(self) -> None:
        # the SDK imports its resource and type modules on first use: do it here, in the
        # worker thread, instead of on the event loop during the first turn
        import openai.types.chat  # noqa: F401

        if self._client is None:
            self._client = self._make_client()
        _ = self._client.chat.completions

    async def complete(self, request: ChatRequest) -> ProviderResponse:
        return await self._call(request, None)

    async def stream(
        self, request: ChatRequest, on_text: Callable[[str], None]
    ) -> ProviderResponse:
        """The same call, streamed: ``on_text`` gets the reply's text as it is written
        (``agent.streaming``; the chunks are read in ``openai_stream``)."""
        return await self._call(request, on_text)

    async def _call(
        self, request: ChatRequest, on_text: Callable[[str], None] | None
    ) -> ProviderResponse:
        import openai

        if self._client is None:
            self._client = self._make_client()
        params: dict[str, Any] = {
            "model": request.model,
            "messages": to_wire_messages(request.messages),
        }
        # OpenAI's own API wants max_completion_tokens; compatible servers know max_tokens.
        limit_key = "max_completion_tokens" if self.config.api_base is None else "max_tokens"
        params[limit_key] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            params["tool_choice"] = request.tool_choice
        try:
            if on_text is not None:
                from vikingbot.providers.openai_stream import collect

                ctx = self.error_context(request.model)
                return await self.within_timeout(
                    collect(self._client, params, on_text, parse_arguments), ctx
                )
            resp = await self.within_timeout(
                self._client.chat.completions.create(**params), self.error_context(request.model)
            )
            return self._parse(resp)
        except openai.OpenAIError as exc:
            raise self._convert(exc, request.model) from exc
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # not the API's shape
            raise malformed_error(self.name, self.base_url, exc) from exc

    def _parse(self, resp: Any) -> ProviderResponse:
        if not resp.choices:
            raise ProviderError(f"the {self.name} endpoint {self.base_url} returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            ToolCall(c.id, c.function.name, parse_arguments(c.function.arguments))
            for c in msg.tool_calls or []
            if getattr(c, "type", "function") == "function"
        ]
        usage = resp.usage
        return ProviderResponse(
            text=msg.content or "",
            tool_calls=calls,
            tokens_in=usage.prompt_tokens if usage else 0,
            tokens_out=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason or "stop",
        )

    def _convert(self, exc: Exception, model: str) -> ProviderError:
        import openai

        ctx = self.error_context(model)
        if isinstance(exc, openai.APIConnectionError):
            return unreachable_error(ctx, timed_out=isinstance(exc, openai.APITimeoutError))
        if isinstance(exc, openai.APIStatusError):
            return status_error(ctx, exc.status_code, error_detail(exc), getattr(exc, "code", None))
        return ProviderError(f"the {self.name} provider failed: {exc}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
