"""The provider seam: one neutral chat format in, one ``ProviderResponse`` out.

A provider kind is a class registered under the ``vikingbot.providers``
entry-point group, constructed as ``Kind(name, config, environ=...)`` where
``name`` is the ``bot.providers`` section it was configured from. It converts
``ChatRequest`` to its wire format, its SDK's errors to ``vikingbot.errors``
types, and usage to token counts. Nothing outside a provider module touches an
SDK type.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar, runtime_checkable

from vikingbot.errors import (
    ContextTooLongError,
    ProviderAuthError,
    ProviderError,
    ProviderNotFoundError,
    ProviderUnavailable,
    ProviderUnreachable,
)
from vikingbot.toolschema import ToolSchema

if TYPE_CHECKING:
    from vikingbot.config.schema import ProviderConfig

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(NamedTuple):
    """A tool call the model asked for. Unpacks as ``(id, name, arguments)``."""

    id: str
    name: str
    arguments: dict[str, Any]


# Key a provider puts in ``ToolCall.arguments`` when the model's arguments were not JSON.
INVALID_ARGUMENTS = "__invalid_json__"


@dataclass(frozen=True)
class ImagePart:
    """An image a person sent, already downscaled and encoded (``vikingbot.media``)."""

    mime: str  # image/jpeg or image/png
    data: bytes = field(repr=False)

    def b64(self) -> str:
        import base64

        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.b64()}"


@dataclass
class ChatMessage:
    """One message of the conversation.

    ``assistant`` messages may carry ``tool_calls``; a ``tool`` message is the
    result of the call ``tool_call_id`` to the tool ``name``; a ``user`` message
    may carry ``images`` (sent only to a model that sees them).
    """

    role: Role
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    images: list[ImagePart] = field(default_factory=list)


@dataclass
class ChatRequest:
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSchema] = field(default_factory=list)
    tool_choice: Literal["auto", "none"] = "auto"
    max_tokens: int = 4096
    temperature: float | None = None

    @property
    def system(self) -> str:
        """All system messages joined (for APIs that take the system prompt apart)."""
        return "\n\n".join(m.content for m in self.messages if m.role == "system")


@dataclass
class ProviderResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str = "stop"


@runtime_checkable
class Provider(Protocol):
    """What the built-in loop needs of a provider (``BaseProvider`` implements all of it)."""

    name: str
    needs_model: bool

    def problem(self, model: str | None) -> str | None:
        """What is missing to make calls (key, base URL, model, program), or None. Cheap."""
        ...

    def warm_up(self) -> None: ...

    async def complete(self, request: ChatRequest) -> ProviderResponse: ...

    def cost(self, tokens_in: int, tokens_out: int, model: str | None = None) -> float: ...

    async def aclose(self) -> None: ...


NO_KEY = "no-key"  # sent to self-hosted endpoints that need no key
T = TypeVar("T")


class BaseProvider:
    """Shared plumbing: name, config, environment, key lookup and cost."""

    kind: str = ""
    key_env: str | None = None  # environment variable holding this kind's API key
    needs_model: bool = True  # False: bot.agents.model may be unset (e.g. command)
    sdk: str | None = None  # the module the kind's client needs ("openai")
    base_url: str = ""  # where requests go (error messages name it)

    def __init__(
        self, name: str, config: ProviderConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.config = config
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    def api_key(self) -> str | None:
        """The key from ``bot.providers.<name>.api_key``, else the kind's environment variable."""
        if self.config.api_key is not None and self.config.api_key.get_secret_value():
            return self.config.api_key.get_secret_value()
        if self.key_env:
            return self.environ.get(self.key_env) or None
        return None

    def client_key(self) -> str:
        """The key to build an SDK client with. A custom ``api_base`` (a self-hosted
        endpoint) may need none: it gets a placeholder; the vendor's own endpoint
        without a key is a clear error."""
        key = self.api_key()
        if key is not None:
            return key
        if self.config.api_base is None:
            raise ProviderAuthError(
                f"no API key for the {self.name} provider; set {self.key_hint()}"
            )
        return NO_KEY

    def problem(self, model: str | None) -> str | None:
        """Every missing piece for this provider to answer, in one sentence; None when ready.

        Ready means: its SDK is installed, there is a key (or a custom ``api_base``
        that may need none) and, for kinds that need one, a model.
        """
        missing: list[str] = []
        if self.sdk and importlib.util.find_spec(self.sdk) is None:
            missing.append(f"the {self.sdk!r} package (pip install {self.sdk})")
        if self.key_env is not None and self.api_key() is None and self.config.api_base is None:
            missing.append(
                f"an API key: set {self.key_hint()} (or bot.providers.{self.name}.api_base "
                "for a self-hosted endpoint that needs no key)"
            )
        if self.needs_model and not model:
            missing.append(
                "a model: set bot.agents.model, e.g. vikingbot config set "
                "bot.agents.model gpt-4o-mini"
            )
        if not missing:
            return None
        return f"the {self.name} provider cannot answer yet; it needs " + "; and ".join(missing)

    def key_hint(self) -> str:
        """Where a user sets the key, for error messages."""
        where = f"bot.providers.{self.name}.api_key"
        return f"{where} or {self.key_env}" if self.key_env else where

    def cost(self, tokens_in: int, tokens_out: int, model: str | None = None) -> float:
        """USD for a call: ``prices[model]`` when the section names that model, else the
        section's ``price_input_per_mtok`` / ``price_output_per_mtok``."""
        price = self.config.prices.get(model) if model else None
        per_in = price.input if price is not None else self.config.price_input_per_mtok
        per_out = price.output if price is not None else self.config.price_output_per_mtok
        return (tokens_in * per_in + tokens_out * per_out) / 1_000_000

    def warm_up(self) -> None:
        """Import and build what the first request needs (called in a worker thread)."""
        return None

    def error_context(self, model: str) -> ErrorContext:
        """What an error message about a request for ``model`` names."""
        return ErrorContext(
            self.name, self.base_url, self.key_hint(), model, self.config.max_retries
        )

    async def within_timeout(self, call: Awaitable[T], ctx: ErrorContext) -> T:
        """``call`` (one model request, the SDK's retries included) bounded as a whole by
        ``timeout_s``. The SDKs' own timeout is per read: an answer that trickles in a byte
        at a time never trips it. Past the bound: ``ProviderUnreachable`` (an outage)."""
        try:
            async with asyncio.timeout(self.config.timeout_s):
                return await call
        except TimeoutError:
            raise unreachable_error(ctx, timed_out=True, after_s=self.config.timeout_s) from None

    async def aclose(self) -> None:
        return None


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for providers that report none."""
    return (len(text) + 3) // 4


_CONTEXT_HINTS = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "reduce the length",
    "input is too long",
)


def looks_like_context_overflow(message: str) -> bool:
    """True when an API error message says the prompt does not fit the model window."""
    low = message.lower()
    return any(h in low for h in _CONTEXT_HINTS)


class ErrorContext(NamedTuple):
    """What an error message needs to name: provider section, URL, key hint, model."""

    name: str
    base_url: str
    key_hint: str
    model: str
    retries: int


def _after_retries(retries: int) -> str:
    if not retries:
        return ""
    return f" after {retries} {'retry' if retries == 1 else 'retries'}"


def unreachable_error(
    ctx: ErrorContext, *, timed_out: bool, after_s: float | None = None
) -> ProviderError:
    what = "timed out" if timed_out else "is unreachable"
    if after_s is not None:
        what = (
            f"timed out (no whole answer within {after_s:g}s; bot.providers.{ctx.name}"
            ".timeout_s bounds the whole request)"
        )
    tried = "" if after_s is not None else _after_retries(ctx.retries)
    return ProviderUnreachable(
        f"the {ctx.name} endpoint {ctx.base_url} {what}{tried}; check that the server is "
        f"running and bot.providers.{ctx.name}.api_base is right"
    )


def malformed_error(name: str, base_url: str, exc: Exception) -> ProviderError:
    """An answer that is not the API's response shape (not JSON, wrong fields)."""
    detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return ProviderError(
        f"the {name} endpoint {base_url} sent an answer that is not a valid response "
        f"({type(exc).__name__}: {detail}); check bot.providers.{name}.api_base points at "
        "the model API"
    )


def status_error(
    ctx: ErrorContext, status: int, detail: str, code: str | None = None
) -> ProviderError:
    """An HTTP error status from a model API -> the ``vikingbot.errors`` type a user can act on."""
    tried = _after_retries(ctx.retries)
    if status in (401, 403):
        return ProviderAuthError(
            f"the {ctx.name} API key was rejected ({status}); set {ctx.key_hint}"
        )
    if status == 413 or (
        status in (400, 422)
        and (code == "context_length_exceeded" or looks_like_context_overflow(detail))
    ):
        return ContextTooLongError(
            f"the conversation is too long for model {ctx.model!r} ({status}: {detail}); "
            "start a new session or lower bot.agents.history_window"
        )
    if status == 404:
        return ProviderNotFoundError(
            f"model {ctx.model!r} was not found at {ctx.base_url} (404: {detail}); "
            f"check bot.agents.model and bot.providers.{ctx.name}.api_base"
        )
    if status == 429:
        return ProviderUnavailable(
            f"the {ctx.name} endpoint {ctx.base_url} is rate limiting (429){tried}: {detail}; "
            f"wait, or raise bot.providers.{ctx.name}.max_retries"
        )
    if status >= 500:
        return ProviderUnavailable(
            f"the {ctx.name} endpoint {ctx.base_url} failed ({status}){tried}: {detail}"
        )
    return ProviderError(
        f"the {ctx.name} endpoint {ctx.base_url} refused the request ({status}): {detail}"
    )


def error_detail(exc: Any) -> str:
    """The human part of an SDK status error: the API's own message when there is one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", exc))
