"""What a command handler is given: who asked, where, and the gateway's parts it may use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vikingbot.commands.approvals import Approvals
    from vikingbot.commands.registry import Registry
    from vikingbot.config.schema import Config
    from vikingbot.session.store import SessionStore
    from vikingbot.session.types import SessionKey


class HeartbeatControls(Protocol):
    """The heartbeat actions ``/heartbeat`` uses (the control API's ``ControlOps`` has them)."""

    async def heartbeat_plan(self, workspace: str | None) -> dict[str, Any]: ...

    async def heartbeat_run_now(self, *, workspace: str | None, force: bool) -> Any: ...

    async def heartbeat_pause(self, workspace: str) -> dict[str, Any]: ...

    async def heartbeat_resume(self, workspace: str) -> dict[str, Any]: ...


Pairing = Callable[[str, str, str], Awaitable[str]]
"""``pair(channel, verb, code)``: the owner's ``/pair approve|deny CODE`` (``list``: codes)."""


@dataclass
class Desk:
    """The parts commands act on, handed by the gateway (each a callable or a small object)."""

    config: Callable[[], Config]
    sessions: SessionStore
    approvals: Approvals
    registry: Registry
    stop_turn: Callable[[SessionKey], bool]  # cancel the chat's running turn: was there one?
    workspace_of: Callable[[SessionKey], str]
    heartbeat: HeartbeatControls | None = None
    pairing: Pairing | None = None


@dataclass(frozen=True)
class CommandCall:
    """One command as a handler sees it."""

    desk: Desk
    key: SessionKey
    place: str  # "<channel>:<chat_id>": where approvals of this chat are asked
    sender: str
    owner: bool
    args: tuple[str, ...]
