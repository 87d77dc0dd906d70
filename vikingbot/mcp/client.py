"""One MCP server's session, on the official ``mcp`` SDK: start, list, call, restart, stop.

A ``Connection`` owns one task that holds the SDK's ``Client`` open (its transport's
task group must be entered and left by one task) until it is told to stop or has
been idle for ``bot.tools.mcp_idle_s``. Turns share it: calls from any task go
through the one session. A call that finds the server gone (the process died, the
HTTP endpoint closed) fails for that call only; the next use starts the server
again, after a backoff that doubles with each failure in a row (0.5 s up to 60 s).
``notifications/tools/list_changed`` marks the listing stale; the next turn lists
again. The SDK is imported here only, when a server is first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.clock import wait_event
from vikingbot.config.loader import expand_vars
from vikingbot.errors import ConfigError, McpError
from vikingbot.mcp.naming import enabled
from vikingbot.mcp.reaper import Running
from vikingbot.mcp.results import render
from vikingbot.mcp.stdio import inherited, stdio_transport
from vikingbot.mcp.types import Listed, State
from vikingbot.redact import mask_text

if TYPE_CHECKING:
    from vikingbot.config.mcp import McpServerConfig

START_TIMEOUT_S = 60.0
MAX_BACKOFF_S = 60.0
MAX_PAGES = 50  # tools/list pages followed per listing
MAX_TOOLS = 128  # tools kept per server (each is in every chat request); docs/mcp.md
MAX_SCHEMA_CHARS = 16_000  # a tool whose input schema is longer is left out
MAX_DESCRIPTION_CHARS = 2000


START_BACKOFF_S = 30.0  # after a start that failed or kept a turn waiting, doubling
MAX_START_BACKOFF_S = 600.0


def start_backoff_s(failures: int) -> float:
    """Seconds before a server whose start failed (or outlasted a turn's wait) is tried
    again: 30 s, 60 s, ... up to 10 minutes. A server stuck in ``initialize`` then costs
    at most one turn's wait per period, not every turn (docs/mcp.md)."""
    return min(MAX_START_BACKOFF_S, START_BACKOFF_S * 2 ** max(0, failures - 1))


def backoff_s(failures: int) -> float:
    """Seconds to wait before starting again after ``failures`` failures in a row: the
    first is retried at once (a server that died is restarted for the next call), then
    0.5 s, 1 s, 2 s ... up to a minute."""
    return 0.0 if failures <= 1 else min(MAX_BACKOFF_S, 0.5 * 2 ** (failures - 2))


class Connection:
    """One configured server and its (at most one) live session."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        environ: Mapping[str, str],
        idle_s: float,
        errlog: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        running: Running | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.environ = environ
        self.idle_s = idle_s
        self.errlog = errlog
        self.running = running
        self.clock = clock
        self.state: State = "stopped"
        self.problem: str | None = None
        self.listed: list[Listed] = []
        self.starts = 0
        self.failures = 0
        self.retry_at = 0.0
        self.last_used = clock()
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._stale = False
        self._busy = 0
        self._lock = asyncio.Lock()
        self.stuck = False  # a start outlasted a turn's wait (see ``outlasted``)

    # ------------------------------------------------------------ lifecycle

    async def ensure(self) -> list[Listed]:
        """The server's tools, starting the server first if it is not running."""
        async with self._lock:
            if self.state == "running" and self._task is not None and not self._task.done():
                if self._stale:
                    await self._relist()
                return self.listed
            wait = self.retry_at - self.clock()
            if wait > 0 and self.problem:
                raise McpError(f"{self.problem} (next try in {wait:.1f} s)")
            if self._task is not None:  # the last session is still winding down
                await self.stop()
            await self._start()
            return self.listed

    async def _start(self) -> None:
        self.state = "starting"
        self.starts += 1
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        except TimeoutError:
            self._stop.set()
            self._failed(
                f"MCP server {self.name!r} did not answer within {START_TIMEOUT_S:.0f} s",
                starting=True,
            )
            raise McpError(self.problem or "") from None
        except McpError as exc:
            self._failed(str(exc), starting=True)
            raise
        self.problem = None
        self.stuck = False

    def outlasted(self, wait_s: float) -> None:
        """A turn's wait for this starting server ran out: counted as a failed start, so
        the next turns go without it (at once) until its back-off ends; the start itself
        goes on and is used if it succeeds meanwhile."""
        if self.state != "starting" or self.stuck:
            return
        self.stuck = True
        self.failures += 1
        self.retry_at = self.clock() + start_backoff_s(self.failures)
        self.problem = (
            f"MCP server {self.name!r} did not finish starting within a turn's wait ({wait_s:g} s)"
        )
        logger.warning(
            "{}; turns go without it for {:.0f} s", self.problem, start_backoff_s(self.failures)
        )

    def backing_off(self) -> bool:
        """Whether a turn should go without this server now, without waiting for it."""
        return (
            self.state in ("starting", "failed")
            and self.retry_at > self.clock()
            and (self.stuck or self.state == "failed")
        )

    def _failed(self, problem: str, *, starting: bool = False) -> None:
        self.state = "failed"
        self.problem = problem
        if not (starting and self.stuck):  # a stuck start was counted when it outlasted a turn
            self.failures += 1
        wait = start_backoff_s(self.failures) if starting else backoff_s(self.failures)
        self.retry_at = max(self.retry_at, self.clock() + wait)
        self.stuck = False
        logger.warning("{}", problem)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Hold the session open until stopped or idle; report a failed start on ``ready``."""
        try:
            from mcp import Client

            async with contextlib.AsyncExitStack() as stack:
                server = await self._transport(stack)
                client = Client(server, message_handler=self._on_message, cache=None)
                await stack.enter_async_context(client)
                self._client = client
                await self._list()
                follow = asyncio.create_task(self._follow_changes(client))
                self.last_used = self.clock()  # idle from now, not from before a slow start
                self.state = "running"
                if not ready.done():
                    ready.set_result(None)
                try:
                    await self._wait_until_done()
                    # from here on no call may take this session (it is closing): the
                    # next ``ensure`` waits for this task and starts a new one
                    self.state = "stopped" if self.state == "running" else self.state
                finally:
                    follow.cancel()
                    await asyncio.gather(follow, return_exceptions=True)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            problem = f"MCP server {self.name!r} ({self._shown()}): {_reason(exc)}"
            if not ready.done():
                ready.set_exception(McpError(problem))
            elif not self._stop.is_set():
                self._failed(problem)
        finally:
            self._client = None
            if self.state in ("running", "starting") and ready.done():
                self.state = "stopped" if self.problem is None else "failed"

    async def _wait_until_done(self) -> None:
        while not self._stop.is_set():
            idle_for = self.clock() - self.last_used
            if self._busy == 0 and idle_for >= self.idle_s:
                logger.info("MCP server {} idle for {:.0f} s: stopped", self.name, idle_for)
                return
            left = max(0.05, self.idle_s - idle_for)
            await wait_event(self._stop, left)

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        cfg = self.config
        try:
            if cfg.kind == "stdio":
                cwd = expand_vars(cfg.cwd, self.environ, self._where("cwd")) if cfg.cwd else None
                command = expand_vars(cfg.command or "", self.environ, self._where("command"))
                args = [expand_vars(a, self.environ, self._where("args")) for a in cfg.args]
                env = {
                    k: expand_vars(v, self.environ, self._where(f"env.{k}"))
                    for k, v in cfg.env.items()
                }
                return stdio_transport(
                    os.path.expanduser(command),
                    args,
                    env={**inherited(self.environ), **env},
                    cwd=os.path.expanduser(cwd) if cwd else None,
                    errlog=self._errlog(stack),
                    running=self.running,
                )
            url = expand_vars(cfg.url or "", self.environ, self._where("url"))
            headers = {
                k: expand_vars(v, self.environ, self._where(f"headers.{k}"))
                for k, v in cfg.headers.items()
            }
        except ConfigError as exc:
            raise McpError(str(exc)) from None
        import httpx2

        if cfg.kind == "sse":
            from mcp.client.sse import sse_client

            return sse_client(url, headers=headers)
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(url, http_client=http)

    def _errlog(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.errlog is None:
            return stack.enter_context(open(os.devnull, "w"))
        self.errlog.parent.mkdir(parents=True, exist_ok=True)
        return stack.enter_context(open(self.errlog, "a", encoding="utf-8"))

    def _where(self, key: str) -> str:
        return f"bot.tools.mcp_servers.{self.name}.{key}"

    def _shown(self) -> str:
        return self.config.shown[:200]

    async def stop(self) -> None:
        """Stop the session (and its process); waits for the owner task to finish."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            if self.state == "starting":  # stuck in initialize: nothing to wait for
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), 10)
            if not task.done():
                task.cancel()
        if self.state != "failed":
            self.state = "stopped"

    # ------------------------------------------------------------ the session

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.warning(
                "MCP server {} sent something unreadable: {}", self.name, str(message)[:200]
            )
            return
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True  # a handshake-era server's notification

    async def _follow_changes(self, client: Any) -> None:
        """A 2026-era server tells of a changed tool list on a ``subscriptions/listen``
        stream (``listen`` refuses older servers, which notify instead)."""
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._stale = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.debug("MCP server {}: no change stream ({})", self.name, _reason(exc))

    async def _list(self) -> None:
        listed: list[Listed] = []
        cursor: str | None = None
        offered = big = 0
        for _ in range(MAX_PAGES):
            async with asyncio.timeout(self.config.tool_timeout_s):  # not wait_for (3.11)
                page = await self._client.list_tools(cursor=cursor, cache_mode="refresh")
            for tool in page.tools:
                if not enabled(self.name, tool.name, self.config.enabled_tools):
                    continue
                offered += 1
                if len(listed) >= MAX_TOOLS:
                    continue
                schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
                if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
                    big += 1
                    continue
                description = (tool.description or "")[:MAX_DESCRIPTION_CHARS]
                listed.append(Listed(tool.name, description, schema))
            cursor = page.next_cursor
            if not cursor or offered > MAX_TOOLS * 4:
                break
        if offered > len(listed):
            logger.warning(
                "MCP server {} offers {}{} tools; {} kept (at most {}, schemas of at most {} "
                "characters: bot.tools.mcp_servers.<name>.enabled_tools picks which)",
                self.name,
                offered,
                "+" if cursor else "",
                len(listed),
                MAX_TOOLS,
                MAX_SCHEMA_CHARS,
            )
        self.listed = listed
        self._stale = False

    async def _relist(self) -> None:
        try:
            await self._list()
        except Exception as exc:  # a listing that fails keeps the last one
            logger.warning("MCP server {}: listing tools again failed: {}", self.name, _reason(exc))

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Call ``tool``; (text for the model, is_error). A dead server raises ``McpError``."""
        await self.ensure()
        client = self._client
        if client is None:
            raise McpError(f"MCP server {self.name!r} is not running")
        timeout = self.config.tool_timeout_s
        self._busy += 1
        try:
            async with asyncio.timeout(timeout):  # no extra task, unlike wait_for
                result = await client.call_tool(tool, args)
        except TimeoutError:
            raise McpError(
                f"{tool} on MCP server {self.name!r} gave no answer within {timeout:g} s "
                "(bot.tools.mcp_servers.<name>.tool_timeout_s); the call was cut"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            gone = self._gone(exc)
            if gone:
                self._failed(f"MCP server {self.name!r} ({self._shown()}) stopped: {_reason(exc)}")
                self._stop.set()
            raise McpError(f"{tool} on MCP server {self.name!r} failed: {_reason(exc)}") from None
        finally:
            self._busy -= 1
            self.last_used = self.clock()
        self.failures = 0
        text = render(list(result.content or []), result.structured_content)
        return text, bool(result.is_error)

    def _gone(self, exc: BaseException) -> bool:
        """Whether the session is over (the task ended, or the connection closed)."""
        if self._task is None or self._task.done():
            return True
        code = getattr(getattr(exc, "error", None), "code", None)
        from mcp_types import CONNECTION_CLOSED

        return code == CONNECTION_CLOSED


def _reason(exc: BaseException) -> str:
    """The innermost meaningful message of an exception (groups unwrapped), capped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found ({exc.filename or exc})"
    text = str(exc) or type(exc).__name__

    return mask_text(text)[:500]
