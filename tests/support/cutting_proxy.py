"""A loopback TCP proxy in front of an HTTP server that can lose a send's answer.

    async with CuttingProxy(port) as proxy:   # listens on 127.0.0.1:proxy.port
        proxy.lose_next(b"/send/", hold=True)   # the server gets it, the client never hears
        await proxy.lost.wait()

``hold=True`` keeps the client's connection open with no answer (its sender is
killed while waiting); ``hold=False`` closes it once the server has answered
(a disconnect mid-send). Everything else is forwarded as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

CHUNK = 65536


class CuttingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.lost = asyncio.Event()
        self._marker: bytes | None = None
        self._hold = False
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lose_next(self, marker: bytes, *, hold: bool) -> None:
        """Lose the answer to the next request whose bytes contain ``marker``."""
        self._marker, self._hold = marker, hold
        self.lost.clear()

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        answers = asyncio.ensure_future(self._pipe(up_reader, writer))
        try:
            while chunk := await reader.read(CHUNK):
                up_writer.write(chunk)
                await up_writer.drain()
                if self._marker is not None and self._marker in chunk:
                    self._marker = None
                    answers.cancel()  # the server answers; the client hears nothing
                    with contextlib.suppress(asyncio.CancelledError):
                        await answers
                    await up_reader.read(CHUNK)
                    self.lost.set()
                    if self._hold:
                        await asyncio.Event().wait()  # until the proxy stops
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            answers.cancel()
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(CHUNK):
                writer.write(chunk)
                await writer.drain()
