"""OpenTelemetry traces, when ``bot.telemetry.otlp_endpoint`` is set (docs/telemetry.md).

One trace per turn: a chat turn's root is its ``invoke_agent`` span; a heartbeat
run's is ``heartbeat.run`` and a cron job's ``cron.run``, each with the agent's
turn inside. Model calls are ``chat <model>`` spans with the GenAI semantic
conventions (``gen_ai.*``: provider, model, tokens, finish reasons; the messages
only with ``bot.telemetry.content``), tool calls ``execute_tool <name>``,
deliveries ``deliver``, the heartbeat's decision ``heartbeat.decide``.

Off (the default) costs nothing: this module imports no OpenTelemetry package
until :func:`configure` is given an endpoint, and :func:`span` hands back one
shared no-op object. The SDK and the OTLP/HTTP exporter are the ``otel`` extra
(``pip install 'vikingbot[otel]'``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from loguru import logger

AttrValue = str | bool | int | float | list[str]


class _Off:
    """The span of a tracer that is off: every method does nothing."""

    __slots__ = ()

    def set(self, key: str, value: Any) -> None:
        return None

    def fail(self, error: BaseException | str) -> None:
        return None


class _On:
    """A recording span (wraps the SDK's)."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self.span.set_attribute(key, value)

    def fail(self, error: BaseException | str) -> None:
        from opentelemetry.trace import Status, StatusCode

        what = type(error).__name__ if isinstance(error, BaseException) else "error"
        self.span.set_attribute("error.type", what)
        self.span.set_status(Status(StatusCode.ERROR, str(error)[:500]))


OFF = _Off()
Span = _Off | _On


class _State:
    tracer: Any = None
    provider: Any = None
    content: bool = False
    kinds: dict[str, Any] = {}  # noqa: RUF012 (one process-wide state)


_state = _State()


def enabled() -> bool:
    return _state.tracer is not None


def content() -> bool:
    """True when message content goes into spans (``bot.telemetry.content``)."""
    return _state.tracer is not None and _state.content


def configure(
    endpoint: str | None,
    *,
    with_content: bool = False,
    service: str = "vikingbot",
    set_global: bool = True,
    headers: Mapping[str, str] | None = None,
) -> bool:
    """Export traces over OTLP/HTTP to ``endpoint`` (``http://host:4318``); None: off.
    True when tracing is on. ``set_global`` also makes it the process's tracer provider
    (SDKs with their own instrumentation, such as ``mcp``, then join the same traces)."""
    shutdown()
    if not endpoint:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.error(
            "bot.telemetry.otlp_endpoint is set but OpenTelemetry is not installed: "
            "pip install 'vikingbot[otel]'; traces are off"
        )
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    exporter = OTLPSpanExporter(endpoint=url, headers=dict(headers or {}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1000))
    if set_global:
        trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.kinds = {"client": trace.SpanKind.CLIENT, "internal": trace.SpanKind.INTERNAL}
    _state.tracer = provider.get_tracer("vikingbot")
    _state.content = with_content
    logger.info("traces go to {} over OTLP/HTTP", url)
    return True


def flush(timeout_s: float = 5.0) -> None:
    if _state.provider is not None:
        _state.provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


class _Recording:
    """``with span(...)`` when tracing is on: the SDK's current-span context, wrapped."""

    __slots__ = ("cm",)

    def __init__(self, name: str, attrs: Mapping[str, Any] | None, kind: str) -> None:
        clean = {k: v for k, v in attrs.items() if v is not None} if attrs else None
        self.cm = _state.tracer.start_as_current_span(
            name, kind=_state.kinds[kind], attributes=clean
        )

    def __enter__(self) -> Span:
        return _On(self.cm.__enter__())

    def __exit__(self, *exc: Any) -> Any:
        return self.cm.__exit__(*exc)


class _OffContext:
    """``with span(...)`` when tracing is off: one shared object, nothing done."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return OFF

    def __exit__(self, *exc: object) -> None:
        return None


_OFF_CONTEXT = _OffContext()


def span(name: str, attrs: Mapping[str, Any] | None = None, *, kind: str = "internal") -> Any:
    """A context manager for one span, a child of the current one; a no-op when off.
    Exceptions leaving it are recorded on the span by the SDK."""
    if _state.tracer is None:
        return _OFF_CONTEXT
    return _Recording(name, attrs, kind)


def as_text(value: Any, limit: int = 20_000) -> str:
    """JSON for a content attribute, capped."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"
