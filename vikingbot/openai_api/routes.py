"""``POST /v1/chat/completions`` and ``GET /v1/models`` on the gateway (docs/openai-api.md).

:func:`openai_routes` is the builder: it takes only what the door uses (the token
store, the model choices, a turn runner, the audit, the gateway's in-flight set)
and returns Starlette routes. Each request carries ``Authorization: Bearer
vbk_...`` (a client token, ``vikingbot api token add``); the client's
conversation (``user``, or the ``X-Vikingbot-Conversation`` header; else
``default``) is the session ``api:<client>:<conversation>``. The gateway's
Host/Origin checks (``webguard``) apply before any route; bodies over the
control API's limit are refused unread (413).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loguru import logger
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from vikingbot.openai_api import wire
from vikingbot.openai_api.live import Transcript
from vikingbot.session.types import SessionKey

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.openai_api.tokens import Client, TokenStore

DEFAULT_MODEL = "vikingbot"
CONVERSATION_HEADER = "x-vikingbot-conversation"
KEEPALIVE_S = 15.0
AUDITS_PER_MINUTE = 30


@dataclass
class Answer:
    """What a turn gave the API: the reply, or why there is none."""

    text: str
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None
    not_ready: bool = False


# prompt, session, turn metadata, the transcript (the turn's live text; ``openai_api.live``)
RunTurn = Callable[[str, SessionKey, dict[str, Any], Transcript], Awaitable[Answer]]
Audit = Callable[[str, str, str, str, dict[str, Any]], None]  # actor, action, subject, outcome


def model_choices(config: Config) -> dict[str, dict[str, str]]:
    """The model ids a client may ask for -> the turn metadata that selects each. Pure.

    ``vikingbot`` is the configured model; then ``provider/model`` for it, the
    heartbeat's own model and each fallback."""
    agents, hb = config.bot.agents, config.bot.heartbeat
    out: dict[str, dict[str, str]] = {DEFAULT_MODEL: {}}
    if agents.provider and agents.model:
        out[f"{agents.provider}/{agents.model}"] = {}
    if hb.provider or hb.model:
        provider = hb.provider or agents.provider
        model = hb.model or agents.model
        if provider and model:
            out.setdefault(f"{provider}/{model}", {"provider": provider, "model": model})
    for fb in agents.fallback_models:
        out.setdefault(f"{fb.provider}/{fb.model}", {"provider": fb.provider, "model": fb.model})
    return out


def resolve_model(choices: dict[str, dict[str, str]], asked: str) -> dict[str, str] | None:
    """The metadata for the id ``asked`` (an id, or a bare model name that names exactly
    one choice); None when it names none. Pure."""
    if asked in choices:
        return choices[asked]
    found = [meta for label, meta in choices.items() if label.split("/", 1)[-1] == asked]
    return found[0] if len(found) == 1 else None


def model_label(choices: dict[str, dict[str, str]], meta: dict[str, str], asked: str) -> str:
    """The id a streamed answer names before the turn says which model answered: the
    ``provider/model`` choice ``meta`` selects (the configured model for ``{}``). Pure."""
    for label, found in choices.items():
        if found == meta and label != DEFAULT_MODEL:
            return label
    return asked


def _error(err: wire.WireError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


class _Refusals:
    """Audits refused tokens, at most ``AUDITS_PER_MINUTE`` a minute (a flood cannot fill
    the table)."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit
        self.window = (0.0, 0)

    async def record(self, request: Request, reason: str) -> None:
        peer = request.client.host if request.client else "unknown"
        logger.warning("OpenAI API: refused {} from {}: {}", request.url.path, peer, reason)
        start, count = self.window
        now = time.monotonic()
        if now - start > 60:
            start, count = now, 0
        self.window = (start, count + 1)
        if count >= AUDITS_PER_MINUTE:
            return
        with contextlib.suppress(Exception):
            args = (f"peer:{peer}", "api.auth", request.url.path[:200], "refused", {"peer": peer})
            await asyncio.to_thread(self.audit, *args)


def openai_routes(
    *,
    tokens: TokenStore,
    settings: Callable[[], Config],
    run: RunTurn,
    audit: Audit,
    max_body: int,
    inflight: set[asyncio.Task[Any]] | None = None,
) -> list[BaseRoute]:
    """The OpenAI-compatible routes (see the module docstring)."""
    refusals = _Refusals(audit)

    async def client_of(request: Request) -> Client | JSONResponse:
        given = request.headers.get("authorization", "")
        token = given[7:].strip() if given[:7].lower() == "bearer " else ""
        client = tokens.check(token) if token else None
        if client is None:
            why = "missing API token" if not token else "wrong API token"
            await refusals.record(request, why)
            return _error(
                wire.WireError(
                    f"{why}: send Authorization: Bearer <token> (vikingbot api token add NAME)",
                    status=401,
                    code="invalid_api_key",
                )
            )
        if not client.allows("chat"):
            await refusals.record(request, f"client {client.name} lacks the chat scope")
            return _error(
                wire.WireError(
                    f"the token of {client.name} does not allow chat "
                    f"(vikingbot api token add {client.name} --scope chat)",
                    status=403,
                    code="insufficient_scope",
                    type="permission_error",
                )
            )
        return client

    async def models(request: Request) -> Response:
        client = await client_of(request)
        if isinstance(client, Response):
            return client
        data = [
            {"id": label, "object": "model", "created": 0, "owned_by": "vikingbot"}
            for label in model_choices(settings())
        ]
        return JSONResponse({"object": "list", "data": data})

    async def completions(request: Request) -> Response:
        client = await client_of(request)
        if isinstance(client, Response):
            return client
        raw = await _read_capped(request, max_body)
        if raw is None:
            return _error(wire.WireError(f"the request body is over {max_body} bytes", status=413))
        try:
            body = json.loads(raw) if raw.strip() else None
        except (UnicodeDecodeError, ValueError) as exc:
            return _error(wire.WireError(f"the request body is not JSON: {exc}"))
        req = wire.parse_request(body)
        if isinstance(req, wire.WireError):
            return _error(req)
        meta = resolve_model(model_choices(settings()), req.model)
        if meta is None:
            known = ", ".join(model_choices(settings()))
            return _error(
                wire.WireError(
                    f"model {req.model[:100]!r} is not one of this bot's models ({known})",
                    "model",
                    status=404,
                    code="model_not_found",
                )
            )
        conversation = request.headers.get(CONVERSATION_HEADER) or req.conversation
        conversation = conversation or wire.DEFAULT_CONVERSATION
        problem = wire.conversation_problem(conversation)
        if problem:
            return _error(wire.WireError(f"the conversation name {problem}", "user"))
        key = SessionKey("api", client.name, conversation)
        turn_meta = {"sender": f"api:{client.name}", **meta}
        if req.stream:
            label = model_label(model_choices(settings()), meta, req.model)
            return StreamingResponse(
                _stream(run, req, key, turn_meta, inflight, label),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        task = asyncio.ensure_future(run(req.prompt, key, turn_meta, Transcript()))
        if inflight is not None:
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        gone = asyncio.ensure_future(_hang_up(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not task.done():  # the client hung up: the turn stops (its prompt is kept)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            logger.info("OpenAI API: {} hung up; the turn was cancelled", key)
            return Response(status_code=499)
        try:
            answer = task.result()
        except asyncio.CancelledError:
            return _error(_stopping())
        if answer.error is not None:
            return _error(_failed(answer), headers={"x-should-retry": "false"})
        cid = wire.completion_id()
        model = answer.model or req.model
        return JSONResponse(
            wire.completion_body(cid, model, answer.text, answer.tokens_in, answer.tokens_out)
        )

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
    ]


def _stopping() -> wire.WireError:
    return wire.WireError(
        "the gateway is stopping; this request was cancelled", status=503, type="server_error"
    )


def _failed(answer: Answer) -> wire.WireError:
    if answer.not_ready:
        return wire.WireError(
            f"vikingbot cannot answer yet: {answer.error}", status=503, type="server_error"
        )
    return wire.WireError(
        f"the turn failed: {answer.error}", status=502, type="server_error", code="turn_failed"
    )


async def _hang_up(request: Request) -> None:
    """Returns when the client disconnects (the body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it passes ``limit`` bytes (the rest is not read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
    return b"".join(parts)


def _sse(data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def _comment(text: str) -> bytes:
    """An SSE comment line (clients ignore it): printable characters only, so no text
    can end the line and start an event of its own."""
    shown = "".join(ch for ch in text if ch.isprintable())[:100]
    return f": {shown}\n\n".encode()


async def _stream(
    run: RunTurn,
    req: wire.CompletionRequest,
    key: SessionKey,
    meta: dict[str, Any],
    inflight: set[asyncio.Task[Any]] | None,
    label: str,
) -> AsyncIterator[bytes]:
    """The turn as server-sent ``chat.completion.chunk`` events, each piece of text as
    the model writes it (``openai_api.live``): a comment every ``KEEPALIVE_S`` while
    nothing else is sent and one as each tool starts, then the finish, the usage (if
    asked), ``[DONE]``. A failed turn is an ``error`` event (the SDKs raise it). A
    client that hangs up cancels the turn."""
    cid, created = wire.completion_id(), int(time.time())
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    live = Transcript(
        emit=lambda piece: queue.put_nowait(("text", piece)),
        on_tool=lambda name: queue.put_nowait(("tool", name)),
    )
    task = asyncio.ensure_future(run(req.prompt, key, meta, live))
    if inflight is not None:
        inflight.add(task)
        task.add_done_callback(inflight.discard)
    sent: list[str] = []

    def event(kind: str, value: str) -> bytes:
        if kind == "tool":
            return _comment(f"tool {value}")
        head = b""
        if not sent:  # the first chunk names the role, as OpenAI's do
            head = _sse(wire.chunk(cid, label, created, {"role": "assistant", "content": ""}))
        sent.append(value)
        return head + _sse(wire.chunk(cid, label, created, {"content": value}))

    getter: asyncio.Future[tuple[str, str]] | None = None
    try:
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(
                {task, getter}, timeout=KEEPALIVE_S, return_when=asyncio.FIRST_COMPLETED
            )
            if getter in done:
                yield event(*getter.result())
                continue
            getter.cancel()  # an item not taken stays in the queue
            with contextlib.suppress(asyncio.CancelledError):
                await getter
            if not done:
                yield b": keep-alive\n\n"
        while not queue.empty():
            yield event(*queue.get_nowait())
        try:
            answer = task.result()
        except asyncio.CancelledError:
            yield _sse(_stopping().body())
            return
        if answer.error is not None:
            yield _sse(_failed(answer).body())
            return
        shown = "".join(sent)
        if answer.text.startswith(shown):  # what the transcript did not carry (if any)
            rest = answer.text[len(shown) :]
            for piece in wire.pieces(rest) if rest else []:
                yield event("text", piece)
        else:
            logger.warning("OpenAI API: {}: the streamed text is not the answer's start", key)
        if not sent:
            yield event("text", "")
        yield _sse(wire.chunk(cid, label, created, {}, "stop"))
        if req.include_usage:
            use = wire.usage(answer.tokens_in, answer.tokens_out)
            yield _sse(wire.chunk(cid, label, created, {}, use=use, choices=False))
        yield _sse("[DONE]")
    finally:
        if getter is not None:
            getter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
