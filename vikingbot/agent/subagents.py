"""Sub-agents: background agent turns a turn starts with the ``spawn`` tool (docs/agent.md).

``Subagents`` (one per loop) holds every running sub-agent; ``TurnSpawner`` (one per
parent turn, the ``ToolContext.spawner``) starts them. A sub-agent is one agent turn:

- in its own session ``subagent:<parent session>:<n>`` (a system session: it is no chat
  and never wakes the heartbeat), in the parent's workspace, prompted with
  ``INSTRUCTIONS`` and its task;
- offered only tools the parent was offered (``allowed``), narrowed further by the
  ``tools`` the parent names; it cannot spawn, and it never asks a person for approval
  (nobody watches it: a call that would need a yes is refused). An unattended parent
  gives an unattended child (``bot.heartbeat.safe_tools`` applies);
- bounded by ``bot.agents.subagent_timeout_s``; at most ``bot.agents.max_subagents``
  run at once for one parent session.

The parent gets the id at once and goes on. The result comes back exactly once
(``Child.reported``): for a chat, through the parent turn's deliverer into its chat,
after the parent turn ended; for an unattended parent (heartbeat, cron), the parent turn
waits for its children before it ends (``TurnSpawner.finish``), so each result is
delivered within the same run and its cost is added to the run's.

``Subagents.cancel(parent)`` stops a parent session's sub-agents: the hook for a stop
command; a cancelled parent turn (Ctrl-C in ``vikingbot chat``, a control-API client that
hangs up) calls it.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from vikingbot.agent.streaming import TURN_STREAM
from vikingbot.agent.types import TurnResult
from vikingbot.errors import ToolError
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import Deliver

if TYPE_CHECKING:
    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config

State = Literal["running", "done", "failed", "timeout", "cancelled"]
RunChild = Callable[[str, SessionKey, dict[str, Any], Deliver | None], Awaitable[TurnResult]]
INSTRUCTIONS = (
    "You are a sub-agent: another agent started you to do one task on your own. Work on "
    "it with the tools you have, then reply with the result in full: your reply is handed "
    "back to whoever asked, as it is. Nobody can answer questions while you work.\n\nTask: "
)
LABEL_CHARS = 60
TASK_CHARS = 20_000
# metadata keys a parent's turn passes on to its children
INHERITED = ("provider", "model", "run_id", "entry", "actor", "unattended")


@dataclass
class Child:
    """One sub-agent, running or finished."""

    id: str  # its session key, subagent:<parent>:<n>
    parent: str  # the parent's session key
    label: str
    started: datetime
    unattended: bool
    state: State = "running"
    result: TurnResult | None = None
    reported: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        """What status and the dashboard show."""
        return {
            "id": self.id,
            "parent": self.parent,
            "label": self.label,
            "started": self.started.isoformat(),
            "state": self.state,
            "unattended": self.unattended,
        }


def report_text(child: Child) -> str:
    """The message a finished sub-agent leaves for its parent. Pure."""
    r = child.result
    head = f"Sub-agent {child.id.rsplit(':', 1)[-1]} ({child.label})"
    if child.state == "done" and r is not None:
        cost = f", ${r.cost_usd:.4f}" if r.cost_usd else ""
        return f"{head} finished ({r.model_calls} model calls{cost}):\n\n{r.text or '(no reply)'}"
    why = {"timeout": "ran out of time", "cancelled": "was cancelled"}.get(child.state, "failed")
    detail = f": {r.error}" if r is not None and r.error else ""
    return f"{head} {why}{detail}"


def add_cost(parent: TurnResult, child: TurnResult) -> None:
    """A child's model use counted in its parent's result (run ledger, budget)."""
    parent.model_calls += child.model_calls
    parent.tokens_in += child.tokens_in
    parent.tokens_out += child.tokens_out
    parent.cost_usd += child.cost_usd
    if child.messages_sent or child.wrote:
        parent.wrote = True


class Subagents:
    """The sub-agents of one agent loop: start, list, cancel, close."""

    def __init__(self, run_child: RunChild, clock: Clock, exists: Callable[[SessionKey], bool]):
        self.run_child = run_child
        self.clock = clock
        self._exists = exists
        self.children: dict[str, Child] = {}
        self._numbers: dict[str, itertools.count[int]] = {}

    def running(self, parent: SessionKey | str | None = None) -> list[Child]:
        """Running sub-agents, all or one parent session's."""
        want = None if parent is None else str(parent)
        return [
            c
            for c in self.children.values()
            if c.state == "running" and (want is None or c.parent == want)
        ]

    def cancel(self, parent: SessionKey | str, only: str | None = None) -> int:
        """Cancel the running sub-agents of ``parent`` (or just the one with id ``only``);
        how many were running."""
        found = [c for c in self.running(parent) if only is None or c.id == only]
        for child in found:
            child.state = "cancelled"
            if child.task is not None:
                child.task.cancel()
        if found:
            logger.info("cancelled {} sub-agent(s) of {}", len(found), parent)
        return len(found)

    async def aclose(self) -> None:
        tasks = [c.task for c in self.running() if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def for_turn(
        self,
        config: Config,
        parent: SessionKey,
        metadata: dict[str, Any],
        *,
        workspace: str,
        allowed: set[str],
        deliver: Deliver | None,
        result: TurnResult,
    ) -> TurnSpawner:
        return TurnSpawner(self, config, parent, metadata, workspace, allowed, deliver, result)

    def next_key(self, parent: SessionKey) -> SessionKey:
        numbers = self._numbers.setdefault(str(parent), itertools.count(1))
        while True:  # a number used before this process started keeps its session
            key = SessionKey.parse(f"subagent:{parent}:{next(numbers)}")
            if str(key) not in self.children and not self._exists(key):
                return key


class TurnSpawner:
    """The ``Spawner`` of one parent turn."""

    def __init__(
        self,
        hub: Subagents,
        config: Config,
        parent: SessionKey,
        metadata: dict[str, Any],
        workspace: str,
        allowed: set[str],
        deliver: Deliver | None,
        result: TurnResult,
    ) -> None:
        self.hub = hub
        self.config = config
        self.parent = parent
        self.metadata = metadata
        self.workspace = workspace
        self.allowed = allowed - {"spawn"}
        self.deliver = deliver
        self.result = result
        self.unattended = bool(metadata.get("unattended") or metadata.get("heartbeat"))
        self.mine: list[Child] = []
        self.ended = asyncio.Event()  # the parent's run_turn returned: chat results may go out

    async def spawn(
        self, task: str, *, label: str | None = None, tools: list[str] | None = None
    ) -> str:
        agents = self.config.bot.agents
        task = task.strip()[:TASK_CHARS]
        if not task:
            raise ToolError("spawn: the task is empty")
        wanted = set(self.allowed if tools is None else tools)
        wider = sorted(wanted - self.allowed)
        if wider:
            raise ToolError(
                f"spawn: a sub-agent may only use tools this turn has; not: {', '.join(wider)}"
            )
        running = len(self.hub.running(self.parent))
        if running >= agents.max_subagents:
            raise ToolError(
                f"spawn: {running} sub-agents are already running for this chat "
                f"(bot.agents.max_subagents is {agents.max_subagents}); wait for one to finish"
            )
        key = self.hub.next_key(self.parent)
        label = " ".join((label or task).split())[:LABEL_CHARS]
        child = Child(str(key), str(self.parent), label, self.hub.clock.now(), self.unattended)
        meta = {k: self.metadata[k] for k in INHERITED if self.metadata.get(k)}
        meta |= {
            "subagent": str(self.parent),
            "workspace": self.workspace,
            "tools": sorted(wanted),
            "timeout_s": agents.subagent_timeout_s,
        }
        if self.unattended:
            meta["unattended"] = True
        self.hub.children[str(key)] = child
        self.mine.append(child)
        # the child's words are not the parent's: its model calls stream into no preview
        # or API answer of the parent's (``agent/streaming.py``)
        alone = contextvars.copy_context()
        alone.run(TURN_STREAM.set, None)
        child.task = asyncio.create_task(
            self._run(child, key, INSTRUCTIONS + task, meta), context=alone
        )
        logger.bind(session=str(self.parent)).info("sub-agent {} started: {}", key, label)
        return str(key)

    async def _run(self, child: Child, key: SessionKey, prompt: str, meta: dict[str, Any]) -> None:
        try:
            result = await self.hub.run_child(prompt, key, meta, self.deliver)
        except asyncio.CancelledError:
            child.state = "cancelled"
            raise
        except Exception as exc:  # a sub-agent's failure is its result, not a crash
            logger.exception("sub-agent {} failed", key)
            child.state, child.result = "failed", TurnResult(text=None, error=str(exc)[:500])
        else:
            child.result = result
            ends: dict[str, State] = {"final": "done", "turn-limit": "done", "timeout": "timeout"}
            child.state = ends.get(result.ended, "failed")
        finally:
            self.hub.children.pop(str(key), None)
        if not self.unattended:
            await self.ended.wait()
            await self._report(child)

    async def _report(self, child: Child) -> None:
        """Hand ``child``'s result to the parent's deliverer: once."""
        if child.reported:
            return
        child.reported = True
        if self.deliver is None:
            logger.warning("sub-agent {} finished with nowhere to report: {}", child.id, child)
            return
        try:
            await self.deliver(report_text(child))
        except Exception:
            logger.exception("could not report sub-agent {}", child.id)

    async def finish(self) -> None:
        """The parent turn's model work is done. An unattended parent waits here for its
        children and reports each result into its own run (their costs added to the run's)."""
        if self.unattended:
            for child in self.mine:
                if child.task is not None:
                    await asyncio.gather(child.task, return_exceptions=True)
                if child.result is not None:
                    add_cost(self.result, child.result)
                await self._report(child)

    def release(self) -> None:
        """The parent's ``run_turn`` returned (its history written): a chat's results may
        go out now, after the turn's own reply."""
        self.ended.set()

    def cancel(self) -> None:
        """The parent turn was cancelled: its session's sub-agents stop too."""
        self.hub.cancel(self.parent)
        self.ended.set()
