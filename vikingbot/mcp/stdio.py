"""The stdio transport for the SDK's ``Client``: a server process and its JSON-RPC lines.

Why not the SDK's ``stdio_client``: it joins each new chunk of stdout onto the
unfinished line with ``buffer + chunk`` and splits it again, which is quadratic in
a line's length, all on the gateway's event loop (figures in bench/README.md). Here lines are read by asyncio's ``StreamReader`` (linear),
up to ``MAX_LINE`` bytes; a longer line is read through and dropped (never held
whole), and the request it answered fails with an error saying so (the session is
handed an error when no request id is found in its first 4 KiB). Everything else follows the SDK's
transport: a small inherited environment (``INHERITED``: PATH, HOME, locale, TZ and
what reaching the network needs, nothing else), the server in its own session (process group), and on close: stdin closed, 0.5 s to
exit, then SIGTERM to the whole group, 1 s, SIGKILL. Windows uses the SDK's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import IO, Any

from loguru import logger

from vikingbot.mcp.reaper import Running, descendants, end_tree

MAX_LINE = 16 * 1024 * 1024  # one JSON-RPC message from a server, at most (docs/mcp.md)
_ID = re.compile(rb'"id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,200}")')
EXIT_GRACE_S = 0.5  # after stdin is closed, to leave on its own
TERM_GRACE_S = 1.0  # after SIGTERM to its process group, before SIGKILL

# What a stdio server inherits from vikingbot's environment (its ``env`` adds to it), and
# nothing else: where programs are and whose home it is, the locale and time zone, and
# how this machine reaches the network (proxies, CA bundles: without them ``uvx``/``npx``
# cannot fetch a server behind a TLS-inspecting proxy). Tokens in the gateway's
# environment (``UV_PUBLISH_TOKEN``, ``PIP_INDEX_URL`` with a password, npm auth tokens,
# API keys) reach a server only when its entry's ``env`` names them (docs/mcp.md).
INHERITED = frozenset(
    {
        "HOME", "PATH", "LANG", "LANGUAGE", "TZ",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    }
)  # fmt: skip
INHERITED_PREFIXES = ("LC_",)  # the locale's categories


def inherited(environ: dict[str, str] | Any) -> dict[str, str]:
    """The part of ``environ`` a stdio server gets without asking (see ``INHERITED``)."""
    return {k: v for k, v in environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


class LineTooLong(ValueError):
    """A server sent a message over ``MAX_LINE`` bytes (it was dropped)."""


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    errlog: IO[Any],
    max_line: int = MAX_LINE,
    running: Running | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server with exactly ``env``; yield the (read, write) streams the SDK's
    session takes."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    proc = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=cwd,
        start_new_session=True,
        limit=max_line,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if running is not None:
        await asyncio.to_thread(running.add, proc.pid)
    stdin, stdout = proc.stdin, proc.stdout
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)

    async def reader() -> None:
        async with read_send:
            while True:
                try:
                    line = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return  # the server closed stdout (it exited)
                except asyncio.LimitOverrunError as exc:
                    head = (
                        await stdout.readexactly(min(exc.consumed, 4096)) if exc.consumed else b""
                    )
                    await _skip_line(stdout)
                    said = f"the server's answer was over {max_line // (1024 * 1024)} MiB and was dropped"
                    found = _ID.search(head[:4096])
                    if found is None:  # no request to fail: the session is told
                        await read_send.send(LineTooLong(said))
                        continue
                    error = {"jsonrpc": "2.0", "id": json.loads(found.group(1)),
                             "error": {"code": -32603, "message": said}}  # fmt: skip
                    line = json.dumps(error).encode()
                if not line.strip():
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    logger.debug("MCP server {} wrote a line that is not JSON-RPC", command)
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    async def writer() -> None:
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(data.encode() + b"\n")
                await stdin.drain()

    tasks = [asyncio.create_task(reader()), asyncio.create_task(writer())]
    try:
        yield read_recv, write_send
    finally:
        for stream in (write_send, read_recv):
            await stream.aclose()
        await _stop(proc)
        if running is not None:
            await asyncio.to_thread(running.remove, proc.pid)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _skip_line(stdout: asyncio.StreamReader) -> None:
    """Read and drop the rest of an over-long line."""
    while True:
        try:
            await stdout.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await stdout.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin and give the server ``EXIT_GRACE_S`` to leave; then end its process
    group and every process descended from it (``reaper.end_tree``: a ``setsid``
    grandchild too), SIGTERM, ``TERM_GRACE_S``, SIGKILL."""
    family = await asyncio.to_thread(descendants, proc.pid)  # before they can be orphaned
    with contextlib.suppress(OSError, RuntimeError):
        if proc.stdin is not None:
            proc.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), EXIT_GRACE_S)
    alive = proc.returncode is None  # else its pid may be another process's by now
    await asyncio.to_thread(
        end_tree, proc.pid, grace_s=TERM_GRACE_S, also=tuple(family), alive=alive
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), 2)
