"""An OTLP/HTTP trace receiver on loopback: the SDK's exporter posts protobuf to it.

with OtlpReceiver.start() as rx:
    telemetry.configure(rx.url, set_global=False)
    ...
    rx.wait_for(lambda spans: len(spans) >= 3)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from vikingbot.testing.server import serve_app, wait_until


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attrs: dict[str, Any]
    error: bool


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.cond = threading.Condition()
        self.url = ""

    async def _traces(self, request: Request) -> Response:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        msg = ExportTraceServiceRequest()
        msg.ParseFromString(await request.body())
        found = [
            Span(
                s.name,
                s.trace_id.hex(),
                s.span_id.hex(),
                s.parent_span_id.hex(),
                s.kind,
                {a.key: _value(a.value) for a in s.attributes},
                s.status.code == 2,
            )
            for rs in msg.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        with self.cond:
            self.spans.extend(found)
            self.cond.notify_all()
        body = ExportTraceServiceResponse().SerializeToString()
        return Response(body, media_type="application/x-protobuf")

    def wait_for(self, ready: Callable[[list[Span]], bool], timeout: float = 30.0) -> None:
        wait_until(self.cond, lambda: ready(self.spans), timeout, "OTLP spans")

    def named(self, name: str) -> list[Span]:
        with self.cond:
            return [s for s in self.spans if s.name == name]

    @classmethod
    @contextmanager
    def start(cls) -> Iterator[OtlpReceiver]:
        rx = cls()
        app = Starlette(routes=[Route("/v1/traces", rx._traces, methods=["POST"])])
        with serve_app(app) as url:
            rx.url = url
            yield rx
