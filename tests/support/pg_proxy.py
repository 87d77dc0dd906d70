"""A TCP proxy on loopback in front of PostgreSQL, to cut the database away on demand.

    with PgProxy(upstream_port=5432) as proxy:       # listens on 127.0.0.1:proxy.port
        url = proxy.url("postgresql://postgres@127.0.0.1:5432/test")
        ...
        proxy.cut()       # drop every open connection, refuse new ones
        proxy.restore()   # accept and forward again

It runs an asyncio loop in a thread of its own, so synchronous tests and benches
can drive it. Loopback only: it listens on 127.0.0.1 and forwards to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from sqlalchemy.engine import make_url

CHUNK = 65536


class PgProxy:
    def __init__(self, *, upstream_port: int = 5432, upstream_host: str = "127.0.0.1") -> None:
        if upstream_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("PgProxy forwards to loopback only")
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.connections = 0  # accepted and forwarded, in total
        self.refused = 0  # connections refused while cut
        self.cut_at: float | None = None
        self.restored_at: float | None = None
        self._cut = False
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # ---- control (any thread) -------------------------------------------

    def start(self) -> PgProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        rendered: str = (
            make_url(url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )
        return rendered

    def cut(self) -> None:
        """Close every open connection now and refuse new ones until ``restore``."""
        self._call(self._do_cut)

    def restore(self) -> None:
        self._call(self._do_restore)

    @property
    def is_cut(self) -> bool:
        return self._cut

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> PgProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Any) -> None:
        async def run() -> None:
            await fn()

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    # ---- the proxy (its own loop) ---------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _do_cut(self) -> None:
        self._cut = True
        self.cut_at = time.time()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _do_restore(self) -> None:
        self._cut = False
        self.restored_at = time.time()

    async def _shutdown(self) -> None:
        await self._do_cut()
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            self.refused += 1
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self.connections += 1
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        self._writers.difference_update((writer, up_writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
