"""What the dashboard is built from: explicit parts handed over by the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vikingbot.bus import Attachment
    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config
    from vikingbot.heartbeat.service import HeartbeatService
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey
    from vikingbot.store.db import StateStore


class ControlActions(Protocol):
    """The control API's actions (the gateway's ``ControlOps``); the dashboard's buttons
    call these, so a click and `vikingbot heartbeat pause` take the same path."""

    async def heartbeat_run_now(
        self, *, workspace: str | None, force: bool, entry: str | None = None
    ) -> Any: ...
    async def heartbeat_set_enabled(self, value: bool) -> dict[str, Any]: ...
    async def heartbeat_pause(self, workspace: str) -> dict[str, Any]: ...
    async def heartbeat_resume(self, workspace: str) -> dict[str, Any]: ...
    async def cron_run(self, name: str) -> dict[str, Any]: ...
    async def inbox_mark_read(self, *, ids: list[int] | None, slot: str | None) -> Any: ...
    async def pair(self, verb: str, code: str) -> dict[str, Any]: ...


RunTurn = Callable[[str, "SessionKey", dict[str, Any]], Awaitable[Any]]
# a chat message's files taken in (the gateway's media intake): the turn's prompt (empty:
# nothing to answer), the metadata it adds (images to show), the lines to tell the person
TakeFiles = Callable[
    ["SessionKey", str, "tuple[Attachment, ...]"],
    Awaitable[tuple[str, dict[str, Any], list[str]]],
]


@dataclass
class DashboardParts:
    store: StateStore
    clock: Clock
    config: Callable[[], Config]  # the config in force (the gateway reloads it)
    config_file: Path
    workspace_root: Path
    secret_file: Path  # the per-home control secret
    heartbeat: HeartbeatService
    sessions: SessionStore
    health: Callable[[], dict[str, Any]]
    agent_problem: Callable[[], str | None]
    run_turn: RunTurn
    apply_config: Callable[[], Awaitable[None]]  # re-read the config file now
    ops: ControlActions
    stopping: asyncio.Event | None = None  # set when the gateway stops: live streams end
    user_skills: Path | None = None  # <home>/skills, listed beside each workspace's own
    take_files: TakeFiles | None = None  # files sent on the chat form; None: not taken

    def gateway_token(self) -> str | None:
        token = self.config().bot.gateway.token
        return token.get_secret_value() if token else None
