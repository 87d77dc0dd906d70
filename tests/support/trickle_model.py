"""A model that writes slowly: OpenAI's streamed chat completions on loopback, word by word.

    with TrickleModel.start(words, every_s=0.05) as model:   # model.base_url: ".../v1"
        ...the provider streams (``"stream": true``)...
        model.first_chunk_at   # time.monotonic() when the first word left
        model.cut.wait(30)     # a streamed answer was cut off (its reader hung up)

Each request is answered with the same text, ``every_s`` between words, then usage
and ``[DONE]``. A request without ``"stream": true`` gets the whole text at once
after as long as writing it word by word takes (the non-streamed reply, for comparing).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class TrickleModel:
    def __init__(self, words: list[str], every_s: float) -> None:
        self.words = words
        self.every_s = every_s
        self.text = "".join(words)
        self.first_chunk_at: list[float] = []  # per streamed request
        self.requests: list[dict[str, Any]] = []
        self.started_at: list[float] = []  # time.monotonic() of each request's arrival
        self.base_url = ""
        self.cut = threading.Event()  # set when a streamed answer's reader hung up mid-way

    @classmethod
    @contextmanager
    def start(cls, words: list[str], every_s: float = 0.05) -> Iterator[TrickleModel]:
        from vikingbot.testing.server import serve_app

        model = cls(words, every_s)
        with serve_app(model.app()) as url:
            model.base_url = url + "/v1"
            yield model

    def _head(self) -> dict[str, Any]:
        return {"id": "chatcmpl-trickle", "created": 1_700_000_000, "model": "fake-model"}

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, StreamingResponse
        from starlette.routing import Route

        async def handle(request: Any) -> Any:
            body = await request.json()
            self.requests.append(body)
            self.started_at.append(time.monotonic())
            usage = {"prompt_tokens": 10, "completion_tokens": len(self.words), "total_tokens": 0}
            if not body.get("stream"):  # as long to write, then all at once
                await asyncio.sleep(self.every_s * len(self.words))
                message = {"role": "assistant", "content": self.text}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                return JSONResponse(
                    {
                        **self._head(),
                        "object": "chat.completion",
                        "choices": [choice],
                        "usage": usage,
                    }
                )

            def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                data = {**self._head(), "object": "chat.completion.chunk", "choices": [choice]}
                return f"data: {json.dumps({**data, **extra})}\n\n".encode()

            async def events() -> Any:
                ended = False
                try:
                    for i, word in enumerate(self.words):
                        if i == 0:
                            self.first_chunk_at.append(time.monotonic())
                        yield chunk(
                            {"role": "assistant", "content": word} if i == 0 else {"content": word}
                        )
                        await asyncio.sleep(self.every_s)
                    yield chunk({}, "stop", usage=usage)
                    yield b"data: [DONE]\n\n"
                    ended = True
                finally:
                    if not ended:
                        self.cut.set()

            return StreamingResponse(events(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/chat/completions", handle, methods=["POST"])])
