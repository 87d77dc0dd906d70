"""A process holding a Telegram channel the way a gateway does (tests and benches).

    python -m tests.support.channel_node NAME DB_URL SCHEMA|- API_BASE TOKEN TTL_S CHECK_S

Opens the state database, starts a ``ChannelManager`` with only Telegram enabled
(sender id ``NAME``, channel lease ``TTL_S``/``CHECK_S``) and prints one line per
change of leadership: ``<unix time> held`` or ``<unix time> standby``, and one
line per message received: ``<unix time> got <text>``. Runs until killed; SIGTERM
stops it cleanly (the lease is released).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time


async def _main(argv: list[str]) -> int:
    from vikingbot.bus import MessageBus
    from vikingbot.channels.manager import ChannelManager
    from vikingbot.config.schema import Config
    from vikingbot.store.db import StateStore

    name, url, schema, api_base, token, ttl_s, check_s = argv
    store = StateStore.open(url, schema=None if schema == "-" else schema)
    config = Config.model_validate(
        {
            "bot": {
                "owner": "telegram:42",
                "channels": {
                    "cli": {"enabled": False},
                    "telegram": {"enabled": True, "token": token, "apiBase": api_base},
                },
            }
        }
    )
    bus = MessageBus()
    manager = ChannelManager(config, bus=bus, store=store, sender=name)

    async def received() -> None:
        while True:
            msg = await bus.next_inbound()
            print(f"{time.time():.3f} got {msg.text}", flush=True)

    reader = asyncio.create_task(received())
    manager.lease_ttl_s, manager.lease_check_s = float(ttl_s), float(check_s)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await manager.start()
    last: str | None = None
    while not stop.is_set():
        state = "held" if manager.held() else "standby"
        if state != last:
            print(f"{time.time():.3f} {state}", flush=True)
            last = state
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)
    reader.cancel()
    await manager.stop()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
