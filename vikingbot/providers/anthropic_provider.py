"""The ``anthropic`` provider kind: Claude through the official ``anthropic`` SDK.

System messages become the ``system`` parameter, tool results travel as
``tool_result`` blocks in user turns, and consecutive messages of one role are
merged (the Messages API wants user and assistant turns to alternate). The SDK
retries 408/409/429/5xx and dropped connections with backoff up to
``max_retries``; its errors are converted into ``vikingbot.errors`` types here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vikingbot.errors import ProviderError
from vikingbot.providers.base import (
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

ANTHROPIC_BASE = "https://api.anthropic.com"


def _blocks(m: ChatMessage) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}]
    blocks: list[dict[str, Any]] = [
        {"type": "image", "source": {"type": "base64", "media_type": i.mime, "data": i.b64()}}
        for i in m.images
    ]
    if m.content.strip():
        blocks.append({"type": "text", "text": m.content})
    for c in m.tool_calls:
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
    return blocks


def to_wire_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages (without system ones) -> alternating Messages-API turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continuing)"}]})
    return out


class AnthropicProvider(BaseProvider):
    kind = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    sdk = "anthropic"

    def __init__(
        self, name: str, config: ProviderConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(name, config, environ=environ)
        self.base_url = (config.api_base or ANTHROPIC_BASE).rstrip("/")
        self._client: Any = None

    def warm_up(self) -> None:
        import anthropic.types  # noqa: F401

        if self._client is None:
            self._client = self._make_client()
        _ = self._client.messages

    def _make_client(self) -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(
            api_key=self.client_key(),
            base_url=self.base_url,
            timeout=self.config.timeout_s,
            max_retries=self.config.max_retries,
        )

    async def complete(self, request: ChatRequest) -> ProviderResponse:
        import anthropic

        if self._client is None:
            self._client = self._make_client()
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": to_wire_messages(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.temperature is not None:
            params["temperature"] = min(request.temperature, 1.0)
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            params["tool_choice"] = {"type": request.tool_choice}
        try:
            resp = await self.within_timeout(
                self._client.messages.create(**params), self.error_context(request.model)
            )
            return self._parse(resp)
        except anthropic.AnthropicError as exc:
            raise self._convert(exc, request.model) from exc
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # not the API's shape
            raise malformed_error(self.name, self.base_url, exc) from exc

    def _parse(self, resp: Any) -> ProviderResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in resp.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, dict(block.input or {})))
        usage = resp.usage
        tokens_in = (
            usage.input_tokens
            + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
        )
        return ProviderResponse(
            text="".join(texts),
            tool_calls=calls,
            tokens_in=tokens_in,
            tokens_out=usage.output_tokens,
            finish_reason=resp.stop_reason or "end_turn",
        )

    def _convert(self, exc: Exception, model: str) -> ProviderError:
        import anthropic

        ctx = self.error_context(model)
        if isinstance(exc, anthropic.APIConnectionError):
            return unreachable_error(ctx, timed_out=isinstance(exc, anthropic.APITimeoutError))
        if isinstance(exc, anthropic.APIStatusError):
            return status_error(ctx, exc.status_code, error_detail(exc))
        return ProviderError(f"the {self.name} provider failed: {exc}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
