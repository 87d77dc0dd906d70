"""Shared pieces for channel tests: a bus, an echoing test agent, a config builder."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.support.outbound import send_reply
from vikingbot.bus import InboundMessage, MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage


def channels_config(owner: str | None = None, send_retries: int = 2, **channels: Any) -> Config:
    """A config with only the given channels (``cli`` off unless given)."""
    section: dict[str, Any] = {"cli": {"enabled": False}, "sendRetries": send_retries}
    section.update(channels)
    bot: dict[str, Any] = {"channels": section}
    if owner is not None:
        bot["owner"] = owner
    return Config.model_validate({"bot": bot})


@pytest.fixture
def make_config() -> Callable[..., Config]:
    return channels_config


@pytest.fixture
def bus() -> MessageBus:
    return MessageBus()


class EchoAgent:
    """A tiny agent: answers every inbound message with ``echo: <text>``, through
    delivery to ``manager`` (the test sets it once the manager runs)."""

    def __init__(self, bus: MessageBus) -> None:
        self.bus = bus
        self.manager: ChannelManager | None = None
        self.seen: list[InboundMessage] = []
        self.results: list[bool] = []

    async def run(self) -> None:
        while True:
            msg = await self.bus.next_inbound()
            self.seen.append(msg)
            reply = OutboundMessage(
                channel=msg.channel,
                chat_id=msg.chat_id,
                thread=msg.thread,
                text=f"echo: {msg.text}",
                dedupe_key=f"reply:{msg.channel}:{msg.chat_id}:{len(self.seen)}",
            )
            assert self.manager is not None, "set echo.manager to the running manager"
            self.results.append(await send_reply(self.manager, reply))


@pytest.fixture
async def echo(bus: MessageBus) -> AsyncIterator[EchoAgent]:
    agent = EchoAgent(bus)
    task = asyncio.create_task(agent.run())
    yield agent
    # cancelled until it ends: on Python 3.11 a cancel that meets a finishing
    # asyncio.wait_for inside a send is swallowed, and the agent waits for the next message
    for _ in range(10):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1)
        if done:
            break
    assert task.done(), "the echo agent did not stop within 10 s of being cancelled"


async def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


@pytest.fixture
def eventually() -> Callable[..., Awaitable[None]]:
    """Wait (polling I/O results, never a schedule) until a condition holds."""
    return _eventually
