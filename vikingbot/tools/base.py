"""What a tool is: a name, a JSON schema, a read-only flag and ``run``.

Tools are registered under the ``vikingbot.tools`` entry-point group (built-ins
and plugins alike) and constructed with no arguments. Everything a call needs
(workspace, session, config, bus, the turn's metadata) arrives in a
``ToolContext``. A tool refuses or fails by raising ``ToolError``; the agent loop
turns that (and any other exception) into text for the model, never a crashed
turn.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from vikingbot.agentio import Lane
from vikingbot.errors import ToolError
from vikingbot.toolschema import ToolSchema

__all__ = [
    "Deliver",
    "DeliveryStatus",
    "Spawner",
    "TellOwner",
    "Tool",
    "ToolContext",
    "ToolSchema",
    "check_args",
]

if TYPE_CHECKING:
    from vikingbot.bus.bus import MessageBus
    from vikingbot.config.schema import Config
    from vikingbot.session.types import SessionKey


DeliveryStatus = Literal["delivered", "inboxed", "failed"]
"""What became of a delivered text.

``delivered``: a channel accepted it; ``inboxed``: no channel or gateway could take it, so it
is kept in the local inbox; ``failed``: it could not be stored anywhere.
"""


class Deliver(Protocol):
    """Hands a turn's result to the delivery service (the caller's adapter).

    ``target`` is the one the agent chose (untrusted: the service validates it and
    falls back to the owner); ``None`` means the caller's default target.
    """

    async def __call__(self, text: str, target: str | None = None) -> DeliveryStatus: ...


TellOwner = Callable[[str, str], Awaitable[bool]]
"""``tell(text, key)``: tell the owner ``text`` once per ``key`` (True when sent now)."""


class Spawner(Protocol):
    """Starts sub-agents for one parent turn (``agent.subagents``); the ``spawn`` tool's part.

    ``tools`` narrows the child's tool set (never wider than the parent's); the answer is
    the sub-agent's id at once, or ``ToolError`` (too many running, a tool not allowed).
    """

    async def spawn(
        self, task: str, *, label: str | None = None, tools: list[str] | None = None
    ) -> str: ...


def is_unattended(metadata: Mapping[str, Any]) -> bool:
    """Nobody is present in this turn (heartbeat, cron, dashboard prompts): the one definition."""
    return bool(metadata.get("unattended") or metadata.get("heartbeat"))


@dataclass
class ToolContext:
    """Everything one tool call may use.

    ``metadata`` is the turn's metadata (``heartbeat``, ``unattended``,
    ``reply_to``, ``run_id``, ``entry``, ...). ``store`` and ``sessions`` are the
    state store and session store when the caller has them (typed loosely so
    that this module imports nothing heavy). ``messages_sent`` counts accepted
    ``message`` tool sends in this turn. ``deliver``, when the caller gave one,
    is how the ``message`` tool hands text to the delivery service. Blocking
    file work goes through ``io`` (``await ctx.io.run(fn, ...)``), never the
    gateway's default thread pool.
    ``user_skills`` is the user's skills folder (``<home>/skills``) when the caller
    knows the home; the ``skill`` tool reads it beside the workspace's own.
    """

    workspace: Path
    session_key: SessionKey
    config: Config
    bus: MessageBus | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    store: Any = None
    sessions: Any = None
    deliver: Deliver | None = None
    user_skills: Path | None = None
    messages_sent: int = 0
    message_attempts: int = 0
    io: Lane = field(default_factory=Lane)  # this turn's way to block: agentio's pool
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)  # keys (.env too)
    tell_owner: TellOwner | None = None  # the gateway's "tell the owner once"
    spawner: Spawner | None = None  # starts sub-agents of this turn (the spawn tool)

    @property
    def unattended(self) -> bool:
        return is_unattended(self.metadata)


class Tool:
    """Base class for tools. Subclasses set the class attributes and ``run``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    read_only: ClassVar[bool] = False

    def schema(self) -> ToolSchema:
        return ToolSchema(self.name, self.description, self.parameters)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        raise NotImplementedError

    def check_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate ``args`` against ``parameters``; return them or raise ``ToolError``."""
        return check_args(self.name, self.parameters, args)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_args(tool: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """A small JSON-schema check: an object, required keys present, basic types right.

    Enough to give the model a precise message ("read_file: missing required
    argument 'path'") instead of a Python traceback.
    """
    if not isinstance(args, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {type(args).__name__}")
    props: dict[str, Any] = schema.get("properties", {})
    missing = [k for k in schema.get("required", []) if k not in args or args[k] is None]
    if missing:
        raise ToolError(f"{tool}: missing required argument(s): {', '.join(missing)}")
    for key, value in args.items():
        spec = props.get(key)
        if spec is None:
            if schema.get("additionalProperties", True) is False:
                raise ToolError(f"{tool}: unknown argument {key!r} (known: {', '.join(props)})")
            continue
        expected = spec.get("type")
        if value is None or expected is None:
            continue
        types = _JSON_TYPES.get(expected)
        if types is None:
            continue
        ok = isinstance(value, types) and not (
            expected in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            raise ToolError(
                f"{tool}: argument {key!r} must be {expected}, got {type(value).__name__}"
            )
        if "enum" in spec and value not in spec["enum"]:
            raise ToolError(f"{tool}: argument {key!r} must be one of {spec['enum']}")
    return args
