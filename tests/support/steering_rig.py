"""A gateway's chat path in one process: real channels, real delivery, the real dispatcher
with its steering (commands, approvals in the chat), a scripted model on loopback.

    async with steering_stack(tmp_path, fake_model, channels={...}, owner="telegram:42") as s:
        ...push a message on the platform's fake or server...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vikingbot.channels.manager import ChannelManager
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.gateway import compose
from vikingbot.gateway.compose import Home, build_home
from vikingbot.gateway.dispatch import Dispatcher
from vikingbot.gateway.steering import Steering


@dataclass
class Stack:
    home: Home
    manager: ChannelManager
    dispatcher: Dispatcher

    @property
    def steering(self) -> Steering:
        assert self.dispatcher.steering is not None
        return self.dispatcher.steering

    def audit(self, action: str) -> list[dict[str, Any]]:
        return self.home.store.audit_events(limit=50, action=action)


def stack_config(fake: Any, *, owner: str, channels: dict[str, Any], **bot: Any) -> Config:
    return Config.model_validate(
        {
            "bot": {
                "owner": owner,
                "agents": {"provider": "openai", "model": "fake-model"},
                "providers": {
                    "openai": {
                        "api_base": fake.base_url,
                        "api_key": "sk-test",
                        "max_retries": 0,
                        "prices": {"fake-model": {"input": 1, "output": 2}, "fake-large": {}},
                    }
                },
                "channels": {"cli": {"enabled": False}, **channels},
                **bot,
            }
        }
    )


@asynccontextmanager
async def steering_stack(tmp_path: Path, config: Config) -> AsyncIterator[Stack]:
    home_dir = tmp_path / "home"
    paths = Paths(
        home=home_dir,
        config_file=home_dir / "config.json",
        data_dir=home_dir / "data",
        database_url=f"sqlite:///{home_dir / 'data' / 'state.db'}",
    )
    home = build_home(config, paths, environ={})
    manager = compose.channels(home, "gw-test")
    await manager.start()
    dispatcher = compose.dispatch(home)
    assert dispatcher.steering is not None
    dispatcher.steering.channel_of = manager.channel
    names = [row["name"] for row in manager.status() if row.get("running")]
    await dispatcher.steering.register_menus([c for n in names if (c := manager.channel(n))])
    stop = asyncio.Event()
    serving = asyncio.create_task(
        dispatcher.serve_inbound(
            home.bus, stop, answering=manager.answering, answered=manager.answered
        )
    )
    try:
        yield Stack(home, manager, dispatcher)
    finally:
        stop.set()
        for task in list(dispatcher.inflight):
            task.cancel()
        await asyncio.wait_for(serving, 20)
        await manager.stop()
        await home.aclose()
