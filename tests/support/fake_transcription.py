"""A loopback OpenAI-compatible ``POST /v1/audio/transcriptions`` that records what it gets.

    with FakeTranscription.start(text="hello there") as fake:
        config.bot.transcription.api_base = fake.base_url     # ".../v1"
        ...
        assert fake.received[0].filename.endswith(".ogg")

``fail_with`` makes it answer that HTTP status with an OpenAI-style error body.
"""

from __future__ import annotations

import email.parser
import email.policy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vikingbot.testing.server import serve_app


@dataclass
class Upload:
    """One transcription request: its form fields and the file as sent."""

    fields: dict[str, str]
    filename: str
    data: bytes
    authorization: str


@dataclass
class FakeTranscription:
    text: str = "hello from the voice note"
    fail_with: int | None = None
    received: list[Upload] = field(default_factory=list)
    base_url: str = ""
    arrived: threading.Event = field(default_factory=threading.Event)

    async def _handle(self, request: Request) -> JSONResponse:
        body = await request.body()
        head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        fields: dict[str, str] = {}
        filename, data = "", b""
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition") or ""
            payload = part.get_payload(decode=True) or b""
            if part.get_filename():
                filename, data = str(part.get_filename()), bytes(payload)
            else:
                fields[str(name)] = bytes(payload).decode("utf-8", "replace")
        auth = request.headers.get("authorization", "")
        self.received.append(Upload(fields, filename, data, auth))
        self.arrived.set()
        if self.fail_with is not None:
            return JSONResponse(
                {"error": {"message": "the model is overloaded", "type": "server_error"}},
                status_code=self.fail_with,
            )
        return JSONResponse({"text": self.text})

    @classmethod
    @contextmanager
    def start(cls, **kwargs: object) -> Iterator[FakeTranscription]:
        fake = cls(**kwargs)  # type: ignore[arg-type]
        app = Starlette(routes=[Route("/v1/audio/transcriptions", fake._handle, methods=["POST"])])
        with serve_app(app) as url:
            fake.base_url = url + "/v1"
            yield fake
