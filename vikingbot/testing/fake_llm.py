"""The script behind the fake model servers (``fake_openai``, ``fake_anthropic``).

A script is a queue of wire-neutral ``Step``s: a text reply, one or more tool
calls, or an HTTP error, each with an optional delay. Each request the fake
server receives is recorded and answered by the next step; when the queue is
empty, by ``responder(request)`` if set, else by ``default`` (a
``HEARTBEAT_OK`` reply unless changed). Each fake renders a step in its own
wire format.

    from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call, error

    with FakeOpenAI.start() as fake:
        fake.script([error(429), tool_call("read_file", {"path": "SOUL.md"}), reply("done")])
        fake.responder = lambda req: reply("Y") if "X" in req.text else None
        ...  # point a provider at fake.base_url
        assert len(fake.requests) == 3
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

from vikingbot.replies import OK_TOKEN


@dataclass(frozen=True)
class Step:
    """One scripted answer. ``status`` other than 200 makes it an error response."""

    text: str = ""
    # (id or None, name, args); args as a str is sent verbatim (e.g. broken JSON)
    calls: tuple[tuple[str | None, str, dict[str, Any] | str], ...] = ()
    status: int = 200
    message: str | None = None  # error message
    error_type: str | None = None
    error_code: str | None = None
    retry_after_s: float | None = None
    delay_s: float = 0.0
    tokens_in: int | None = None  # None: estimated from the request
    tokens_out: int | None = None  # None: estimated from the reply
    raw: str | None = None  # sent as the response body exactly (e.g. not JSON at all)
    trickle: bool = False  # a 200 whose body comes a byte at a time and never ends

    @property
    def is_error(self) -> bool:
        return self.status != 200


def reply(
    text: str, *, delay_s: float = 0.0, tokens_in: int | None = None, tokens_out: int | None = None
) -> Step:
    """A plain text answer."""
    return Step(text=text, delay_s=delay_s, tokens_in=tokens_in, tokens_out=tokens_out)


def garbage(body: str = "{not json at all") -> Step:
    """A 200 answer whose body is ``body`` as is."""
    return Step(raw=body)


def trickle() -> Step:
    """A 200 answer that sends a space every 20 ms for ever (never a whole answer)."""
    return Step(trickle=True)


def tool_call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    *,
    id: str | None = None,
    text: str = "",
    delay_s: float = 0.0,
) -> Step:
    """An answer asking for one tool call (optionally with some text beside it)."""
    args = arguments if isinstance(arguments, str) else dict(arguments or {})
    return Step(text=text, calls=((id, name, args),), delay_s=delay_s)


def tool_calls(*calls: tuple[str, dict[str, Any]], text: str = "", delay_s: float = 0.0) -> Step:
    """An answer asking for several tool calls at once: ``tool_calls(("a", {}), ("b", {}))``."""
    return Step(
        text=text, calls=tuple((None, name, dict(args)) for name, args in calls), delay_s=delay_s
    )


def error(
    status: int,
    message: str | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    retry_after_s: float | None = 0.01,
    delay_s: float = 0.0,
) -> Step:
    """An HTTP error. 429 and 5xx carry a short ``retry-after-ms`` so SDK retries are quick."""
    return Step(
        status=status,
        message=message,
        error_type=type,
        error_code=code,
        retry_after_s=retry_after_s,
        delay_s=delay_s,
    )


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif isinstance(value, dict):
        for key in ("content", "text", "system"):
            if key in value:
                _strings(value[key], out)


def _user_text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        ]
        if texts:
            return "\n".join(texts)
    return None


@dataclass
class RecordedRequest:
    """One request the fake received (the JSON body as sent by the SDK)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.time)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def system(self) -> str:
        """The system prompt (Anthropic ``system``, or OpenAI system messages)."""
        parts: list[str] = []
        _strings(self.body.get("system") or [], parts)
        for m in self.messages:
            if m.get("role") == "system":
                _strings(m.get("content"), parts)
        return "\n".join(parts)

    @property
    def text(self) -> str:
        """Every piece of text in the request (system prompt and all messages), joined."""
        parts: list[str] = []
        _strings(self.body.get("system") or [], parts)
        for m in self.messages:
            _strings(m, parts)
        return "\n".join(parts)

    @property
    def last_user_text(self) -> str:
        """The text of the last user message that carries text (not only tool results)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                text = _user_text(m)
                if text is not None:
                    return text
        return ""

    @property
    def tool_names(self) -> list[str]:
        names = []
        for t in self.body.get("tools") or []:
            fn = t.get("function", t)
            names.append(str(fn.get("name", "")))
        return names

    @property
    def tool_choice(self) -> Any:
        return self.body.get("tool_choice")

    def estimated_tokens(self) -> int:
        return max(1, len(json.dumps(self.messages)) // 4)


Responder = Callable[[RecordedRequest], "Step | str | None"]


class ScriptedModel:
    """Thread-safe script state shared by a fake server's request handler and the test."""

    def __init__(self, default: Step | None = None) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Step] = deque()
        self.requests: list[RecordedRequest] = []
        self.responder: Responder | None = None
        self.default: Step = default or reply(OK_TOKEN)
        self.delay_s = 0.0  # added to every response

    def script(self, steps: Iterable[Step | str]) -> None:
        """Replace the queue; a plain string is a text reply."""
        with self._lock:
            self._queue = deque(reply(s) if isinstance(s, str) else s for s in steps)

    def then(self, *steps: Step | str) -> None:
        """Append to the queue."""
        with self._lock:
            self._queue.extend(reply(s) if isinstance(s, str) else s for s in steps)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        """Empty the queue and forget recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def answer(self, request: RecordedRequest) -> Step:
        """Record ``request`` and pick the step that answers it."""
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is not None:
            step = responder(request)
            if step is not None:
                return reply(step) if isinstance(step, str) else step
        return self.default


class FakeModelServer(ScriptedModel):
    """A scripted model API on a loopback port; subclasses speak one wire format.

    Use ``Fake.start()`` as a context manager; inside it ``base_url`` is what a
    provider's ``api_base`` should be. With ``require_key`` set, a request with
    any other key is answered 401 (as the real API would).
    """

    route = "/"
    base_path = ""

    def __init__(self, default: Step | None = None, require_key: str | None = None) -> None:
        super().__init__(default)
        self.require_key = require_key
        self.root_url = ""
        self._served = 0
        # Scripted delays wait on this; release() ends them at once (server stopping).
        self._wake: tuple[Any, Any] | None = None  # (server loop, asyncio.Event)
        self._released = False

    @property
    def base_url(self) -> str:
        return self.root_url + self.base_path

    @classmethod
    @contextmanager
    def start(
        cls, *, default: Step | None = None, require_key: str | None = None
    ) -> Iterator[Self]:
        from vikingbot.testing.server import serve_app

        fake = cls(default=default, require_key=require_key)
        with serve_app(fake.app()) as root:
            fake.root_url = root
            try:
                yield fake
            finally:
                fake.release()

    def release(self) -> None:
        """End every scripted delay now (and skip later ones): a test that left a reply
        hanging stops at once instead of waiting out the delay in teardown."""
        with self._lock:
            self._released = True
            wake = self._wake
        if wake is not None:
            loop, event = wake
            with contextlib.suppress(RuntimeError):  # the server loop already closed
                loop.call_soon_threadsafe(event.set)

    async def _delay(self, seconds: float) -> None:
        import asyncio

        with self._lock:
            if self._released:
                return
            if self._wake is None:
                self._wake = (asyncio.get_running_loop(), asyncio.Event())
            event = self._wake[1]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[Route(self.route, self._handle, methods=["POST"])])

    async def _handle(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            body = await request.json()
        except ValueError:
            body = {}
        recorded = RecordedRequest(request.url.path, dict(request.headers), body)
        step = self.answer(recorded)
        delay = step.delay_s + self.delay_s
        if delay > 0:
            await self._delay(delay)
        key = self.presented_key(recorded.headers)
        if self.require_key is not None and key != self.require_key:
            step = error(401)
        if step.is_error:
            headers = {}
            if step.retry_after_s is not None and (step.status == 429 or step.status >= 500):
                headers["retry-after-ms"] = str(max(1, int(step.retry_after_s * 1000)))
            return JSONResponse(self.render_error(step, recorded), step.status, headers)
        if step.raw is not None:
            from starlette.responses import Response

            return Response(step.raw, 200, media_type="application/json")
        if step.trickle:
            from starlette.responses import StreamingResponse

            async def forever() -> Any:
                import asyncio

                while True:
                    yield b" "
                    await asyncio.sleep(0.02)

            return StreamingResponse(forever(), 200, media_type="application/json")
        with self._lock:
            self._served += 1
            n = self._served
        rendered = self.render_reply(step, recorded, n)
        if isinstance(body, dict) and body.get("stream"):
            events = self.render_stream(rendered)
            if events is not None:
                from starlette.responses import StreamingResponse

                async def sse() -> Any:
                    for event, data in events:  # no name: a bare data line (OpenAI's)
                        name = f"event: {event}\n" if event else ""
                        text = data if isinstance(data, str) else json.dumps(data)
                        yield f"{name}data: {text}\n\n".encode()

                return StreamingResponse(sse(), 200, media_type="text/event-stream")
        return JSONResponse(rendered)

    def presented_key(self, headers: dict[str, str]) -> str | None:
        raise NotImplementedError

    def render_stream(self, rendered: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """The reply as server-sent events for a ``"stream": true`` request (None: JSON):
        ``(event name or "", data)``, data a JSON value or a string sent as it is."""
        return None

    def render_reply(self, step: Step, request: RecordedRequest, n: int) -> dict[str, Any]:
        raise NotImplementedError

    def render_error(self, step: Step, request: RecordedRequest) -> dict[str, Any]:
        raise NotImplementedError


def default_error_message(status: int, model: str) -> str:
    return {
        400: "Bad request.",
        401: "Incorrect API key provided.",
        403: "You are not allowed to use this model.",
        404: f"The model `{model}` does not exist or you do not have access to it.",
        429: "Rate limit reached. Please try again later.",
        500: "The server had an error while processing your request.",
        502: "Bad gateway.",
        503: "The server is overloaded or not ready yet.",
        529: "Overloaded.",
    }.get(status, f"HTTP {status}")


def tokens(step: Step, request: RecordedRequest) -> tuple[int, int]:
    """(tokens in, tokens out) for a reply: scripted, else estimated."""
    tin = step.tokens_in if step.tokens_in is not None else request.estimated_tokens()
    out_text = step.text + "".join(json.dumps(a) for _, _, a in step.calls)
    tout = step.tokens_out if step.tokens_out is not None else max(1, len(out_text) // 4)
    return tin, tout
