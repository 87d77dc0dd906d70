"""The gateway's control API: `/api/v1/...` routes on the gateway's Starlette app.

Authentication (:class:`ControlGuard`): every `/api/` request carries
``Authorization: Bearer <secret>``, the per-home secret the gateway writes to
``<home>/run/control.secret`` (0600) at start. A peer that is not on loopback must
also send the gateway token (``bot.gateway.token``) as ``X-Vikingbot-Token``.
Refusals answer 401 (no/wrong secret) or 403 (remote peer without the token), are
audited (``control.auth``, capped per minute so a flood cannot fill the table)
and never stop the gateway.

Route handlers only parse and answer; the work is done by the plain functions of
:class:`ControlOps` (``vikingbot.gateway.ops``), which the dashboard reuses. Every
route is documented in docs/api.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from loguru import logger
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from vikingbot.errors import VikingbotError
from vikingbot.fsutil import disk_path, disk_problem
from vikingbot.gateway.errors import BadRequest, NotFound
from vikingbot.gateway.peers import is_loopback

if TYPE_CHECKING:
    from vikingbot.gateway.ops import ControlOps

API_PREFIX = "/api/"
MAX_BODY_BYTES = 64 * 1024
TOKEN_HEADER = b"x-vikingbot-token"
AUDITS_PER_MINUTE = 30


def _peer_is_loopback(scope: Any) -> bool:
    client = scope.get("client")
    if not client:
        return False  # unknown peer (e.g. a Unix socket proxy): treat as remote
    return is_loopback(str(client[0]))


class ControlGuard:
    """ASGI wrapper that authenticates `/api/` requests (see the module docstring)."""

    def __init__(
        self,
        app: Any,
        *,
        secret: str,
        token: str | None,
        audit: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.app = app
        self._secret = f"Bearer {secret}".encode()
        self._token = token.encode() if token else None
        self._audit = audit
        self._window = (0.0, 0)
        self.refused = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(API_PREFIX):
            problem = self._check(scope)
            if problem is not None:
                status, reason = problem
                self.refused += 1
                await self._record(scope, reason)
                await JSONResponse({"error": reason}, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check(self, scope: Any) -> tuple[int, str] | None:
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if not hmac.compare_digest(given, self._secret):
            what = "missing" if not given else "wrong"
            return 401, f"{what} control secret (Authorization: Bearer <run/control.secret>)"
        if not _peer_is_loopback(scope):
            token = headers.get(TOKEN_HEADER, b"")
            if self._token is None or not hmac.compare_digest(token, self._token):
                return 403, "a remote peer needs the gateway token (X-Vikingbot-Token)"
        return None

    async def _record(self, scope: Any, reason: str) -> None:
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        path = str(scope.get("path", ""))[:200]
        logger.warning(
            "control API: refused {} {} from {}: {}", scope.get("method"), path, peer, reason
        )
        if self._audit is None:
            return
        start, count = self._window
        now = time.monotonic()
        if now - start > 60:
            start, count = now, 0
        if count >= AUDITS_PER_MINUTE:
            self._window = (start, count)
            return
        self._window = (start, count + 1)
        try:
            await asyncio.to_thread(self._audit, peer, path, reason)
        except Exception:  # an audit failure must not take the gateway down
            logger.exception("control API: could not audit a refused request")


# ---------------------------------------------------------------- request helpers


async def json_body(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request's JSON object body ({} when empty); ``BadRequest`` otherwise."""
    raw = await request.body()
    if len(raw) > limit:
        raise BadRequest(f"request body is {len(raw)} bytes; the limit is {limit}")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def opt_str(data: dict[str, Any], key: str, *, max_len: int = 10_000) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key!r} must be a string, got {type(value).__name__}")
    if len(value) > max_len:
        raise BadRequest(f"{key!r} is {len(value)} characters; the limit is {max_len}")
    return value


def req_str(data: dict[str, Any], key: str, *, max_len: int = 10_000) -> str:
    value = opt_str(data, key, max_len=max_len)
    if value is None or not value.strip():
        raise BadRequest(f"{key!r} is required")
    return value


def opt_bool(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{key!r} must be true or false")
    return value


def opt_int(raw: str | None, key: str, default: int, lo: int, hi: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{key!r} must be an integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{key!r} must be between {lo} and {hi}")
    return value


async def until_client_leaves(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``; if the client hangs up first (Ctrl-C in `vikingbot chat`), cancel it.

    A cancelled turn keeps the user's prompt in the session and writes no reply.
    """
    task = asyncio.ensure_future(work)

    async def hang_up() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(hang_up())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # the turn's history is written before we answer
    if task.cancelled():
        logger.info("control API: {} cancelled: the client went away", request.url.path)
        raise ClientGone("the client went away; the request was cancelled")
    return task.result()


class ClientGone(VikingbotError):
    """The client closed the connection before the answer was ready."""


Handler = Callable[[Request], Awaitable[Any]]


def endpoint(
    fn: Handler, inflight: set[asyncio.Task[Any]] | None = None
) -> Callable[[Request], Awaitable[Response]]:
    """Turn a handler returning JSON data into an endpoint with clear errors.

    With ``inflight``, the request's task is kept there while it runs, so the
    gateway's stop can cancel a long request (a turn) with the rest of the work.
    """

    async def run(request: Request) -> Response:
        task = asyncio.current_task()
        if inflight is not None and task is not None:
            inflight.add(task)
        try:
            data = await fn(request)
        except asyncio.CancelledError:
            # the gateway is stopping: say so rather than drop the connection
            return JSONResponse(
                {"error": "the gateway is stopping; this request was cancelled"}, status_code=503
            )
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except VikingbotError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except Exception as exc:
            problem = disk_problem(exc)
            if problem is not None:  # a full or read-only disk: one line, 507
                where = disk_path(exc) or "the state database"
                logger.error("control API: {} {}: {}", request.method, request.url.path, problem)
                return JSONResponse({"error": f"cannot write {where}: {problem}"}, status_code=507)
            logger.exception("control API: {} {} failed", request.method, request.url.path)
            return JSONResponse(
                {"error": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500
            )
        finally:
            if inflight is not None and task is not None:
                inflight.discard(task)
        if isinstance(data, Response):  # a handler that answers in its own way (a stream)
            return data
        return JSONResponse(data)

    return run


def control_routes(ops: ControlOps) -> list[BaseRoute]:
    """The `/api/v1` routes (see docs/api.md)."""

    def endpoint_(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        return endpoint(fn, ops.inflight)

    async def gateway_info(request: Request) -> Any:
        return ops.gateway_info()

    async def hb_status(request: Request) -> Any:
        return await ops.heartbeat_status()

    async def hb_plan(request: Request) -> Any:
        workspace = request.query_params.get("workspace") or None
        if workspace is not None and len(workspace) > 200:
            raise BadRequest("workspace: at most 200 characters")
        return await ops.heartbeat_plan(workspace)

    async def hb_run_now(request: Request) -> Any:
        body = await json_body(request)
        return await ops.heartbeat_run_now(
            workspace=opt_str(body, "workspace", max_len=200),
            force=opt_bool(body, "force"),
            entry=opt_str(body, "entry", max_len=500),
        )

    async def hb_enable(request: Request) -> Any:
        return await ops.heartbeat_set_enabled(True)

    async def hb_disable(request: Request) -> Any:
        return await ops.heartbeat_set_enabled(False)

    async def hb_pause(request: Request) -> Any:
        body = await json_body(request)
        return await ops.heartbeat_pause(req_str(body, "workspace", max_len=200))

    async def hb_resume(request: Request) -> Any:
        body = await json_body(request)
        return await ops.heartbeat_resume(req_str(body, "workspace", max_len=200))

    async def cron_run(request: Request) -> Any:
        return await ops.cron_run(request.path_params["job_id"])

    async def inbox_list(request: Request) -> Any:
        q = request.query_params
        return await ops.inbox_list(
            slot=q.get("slot"),
            unread=q.get("unread") in ("1", "true", "yes"),
            limit=opt_int(q.get("limit"), "limit", 50, 1, 1000),
        )

    async def inbox_read(request: Request) -> Any:
        body = await json_body(request)
        ids = body.get("ids")
        if ids is not None and (
            not isinstance(ids, list)
            or len(ids) > 10_000
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        ):
            raise BadRequest("'ids' must be a list of integers (at most 10000)")
        return await ops.inbox_mark_read(ids=ids, slot=opt_str(body, "slot", max_len=200))

    async def chat(request: Request) -> Any:
        from vikingbot.bus.sent_files import SentFilesError, parse_sent_files
        from vikingbot.gateway.bodycap import FILES_LIMIT

        body = await json_body(request, FILES_LIMIT)  # files ride along (docs/media.md)
        text = req_str(body, "text", max_len=100_000)
        session = opt_str(body, "session", max_len=300) or "cli:default:local"
        try:
            files = parse_sent_files(body.pop("files", None))
        except SentFilesError as exc:
            raise BadRequest(str(exc)) from None
        atts = tuple(f.attachment() for f in files)
        if opt_bool(body, "stream"):  # retries as they happen, then the result (chat_stream)
            from vikingbot.gateway.chat_stream import ChatStream

            steering = ops.steering
            return ChatStream(
                lambda: ops.chat(text, session=session, attachments=atts),
                inflight=ops.inflight,
                path="/api/v1/chat",
                asker=None if steering is None else partial(steering.terminal_asker, session),
            )
        return await until_client_leaves(request, ops.chat(text, session=session, attachments=atts))

    async def chat_answer(request: Request) -> Any:
        """The terminal's answer to an ``ask`` event of its chat stream."""
        body = await json_body(request)
        session = opt_str(body, "session", max_len=300) or "cli:default:local"
        ident = req_str(body, "id", max_len=20)
        if ops.steering is None:
            raise NotFound("approvals are not asked in this gateway")
        return {"text": ops.steering.terminal_answer(session, ident, opt_bool(body, "yes"))}

    async def pair(request: Request) -> Any:
        """``vikingbot pair``: list, approve or deny a pairing code (commands/pairing.py)."""
        body = await json_body(request)
        verb = req_str(body, "verb", max_len=10)
        if verb not in ("list", "approve", "deny"):
            raise BadRequest("'verb' must be list, approve or deny")
        code = opt_str(body, "code", max_len=40) or ""
        return await ops.pair(verb, code)

    async def events(request: Request) -> Any:
        q = request.query_params
        return await ops.events(
            after=opt_int(q.get("after"), "after", 0, 0, 2**62),
            wait_s=opt_int(q.get("wait"), "wait", 0, 0, 60),
        )

    async def config_apply(request: Request) -> Any:
        return await ops.config_apply()

    return [
        Route("/api/v1/gateway", endpoint_(gateway_info), methods=["GET"]),
        Route("/api/v1/heartbeat/status", endpoint_(hb_status), methods=["GET"]),
        Route("/api/v1/heartbeat/plan", endpoint_(hb_plan), methods=["GET"]),
        Route("/api/v1/heartbeat/run-now", endpoint_(hb_run_now), methods=["POST"]),
        Route("/api/v1/heartbeat/enable", endpoint_(hb_enable), methods=["POST"]),
        Route("/api/v1/heartbeat/disable", endpoint_(hb_disable), methods=["POST"]),
        Route("/api/v1/heartbeat/pause", endpoint_(hb_pause), methods=["POST"]),
        Route("/api/v1/heartbeat/resume", endpoint_(hb_resume), methods=["POST"]),
        Route("/api/v1/cron/jobs/{job_id}/run", endpoint_(cron_run), methods=["POST"]),
        Route("/api/v1/inbox", endpoint_(inbox_list), methods=["GET"]),
        Route("/api/v1/inbox/read", endpoint_(inbox_read), methods=["POST"]),
        Route("/api/v1/chat", endpoint_(chat), methods=["POST"]),
        Route("/api/v1/events", endpoint_(events), methods=["GET"]),
        Route("/api/v1/config/apply", endpoint_(config_apply), methods=["POST"]),
        Route("/api/v1/chat/answer", endpoint_(chat_answer), methods=["POST"]),
        Route("/api/v1/pair", endpoint_(pair), methods=["POST"]),
    ]
