"""A loopback search backend speaking Brave's, Tavily's and SearXNG's JSON wire formats.

``FakeSearch.start()`` serves, on one port: Brave (``GET /res/v1/web/search``, key in
``X-Subscription-Token``), Tavily (``POST /search``, bearer key, JSON body) and SearXNG
(``GET /search?format=json``). ``hits`` is what every backend answers (each in its own
shape); ``fail`` makes the next answers a status (429, 500) or ``"garbage"``; ``delay_s``
holds each answer. ``requests`` records what arrived.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

from vikingbot.testing.server import serve_app


@dataclass
class Seen:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeSearch:
    hits: list[tuple[str, str, str]] = field(default_factory=list)  # title, url, snippet
    fail: int | str | None = None
    delay_s: float = 0.0
    requests: list[Seen] = field(default_factory=list)
    base_url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    @contextmanager
    def start(cls) -> Iterator[Self]:
        fake = cls()
        with serve_app(fake.app()) as url:
            fake.base_url = url
            yield fake

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def answer(request: Request, shape: str) -> Response:
            body = await request.json() if request.method == "POST" else None
            with self._lock:
                self.requests.append(
                    Seen(
                        request.method,
                        request.url.path,
                        dict(request.query_params),
                        {k.lower(): v for k, v in request.headers.items()},
                        body,
                    )
                )
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.fail == "garbage":
                return Response(b"<html>\x00\xff not json {", media_type="application/json")
            if isinstance(self.fail, int):
                headers = {"Retry-After": "7"} if self.fail == 429 else {}
                return JSONResponse({"error": "no"}, status_code=self.fail, headers=headers)
            return JSONResponse(self.shaped(shape))

        async def brave(request: Request) -> Response:
            return await answer(request, "brave")

        async def search(request: Request) -> Response:
            return await answer(request, "tavily" if request.method == "POST" else "searxng")

        return Starlette(
            routes=[
                Route("/res/v1/web/search", brave, methods=["GET"]),
                Route("/search", search, methods=["GET", "POST"]),
            ]
        )

    def shaped(self, shape: str) -> dict[str, Any]:
        if shape == "brave":
            rows = [{"title": t, "url": u, "description": s, "age": "1d"} for t, u, s in self.hits]
            return {"type": "search", "query": {"original": "q"}, "web": {"results": rows}}
        rows = [{"title": t, "url": u, "content": s, "score": 0.5} for t, u, s in self.hits]
        if shape == "tavily":
            return {"query": "q", "results": rows, "response_time": 0.1}
        return {"query": "q", "number_of_results": len(rows), "results": rows, "answers": []}
