"""What the bot's MCP server does, apart from the protocol: the tools as plain functions.

:class:`BotDoor` is given the parts it uses (read the plan, run a cycle, list the
inbox, tell the owner, search history, audit, the workspaces folder, the clock)
and answers each tool call as JSON-ready data. Every call is audited
(``mcp.<tool>``, actor ``mcp:<client>``), refused or not. Tools that change
something (``WRITE_TOOLS``) need the ``mcp-write`` scope. HEARTBEAT.md is edited
only through ``heartbeat.rewrite`` under the file's lock, re-read inside it: an
edit made meanwhile (the user's editor, a cycle's completion) is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vikingbot.clock import Clock
from vikingbot.errors import HeartbeatError, VikingbotError
from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import Complete, add_entry, apply_moves, locked_edit

WRITE_TOOLS = frozenset(
    {"add_heartbeat_entry", "complete_heartbeat_entry", "run_heartbeat_now", "message_owner"}
)
MAX_TEXT = 4000


class McpRefused(VikingbotError):
    """An MCP call the bot will not do (scope, bad argument); the message says why."""


@dataclass(frozen=True)
class Caller:
    """Who calls: the client's name and whether it may write."""

    name: str
    write: bool


@dataclass
class BotDoor:
    plan: Callable[[str | None], Awaitable[dict[str, Any]]]
    run_now: Callable[[str | None], Awaitable[Any]]
    inbox: Callable[[str | None, bool, int], Awaitable[list[dict[str, Any]]]]
    tell_owner: Callable[[str], Awaitable[dict[str, Any]]]
    search: Callable[[str, int], list[dict[str, Any]]]
    audit: Callable[[str, str, str, str, str | None], None]
    workspace_root: Path
    clock: Clock

    async def call(self, caller: Caller, tool: str, args: dict[str, Any]) -> Any:
        """Run ``tool`` for ``caller``; audited whatever happens."""
        subject = str(args.get("workspace") or args.get("query") or "")[:200]
        try:
            if tool in WRITE_TOOLS and not caller.write:
                raise McpRefused(
                    f"{tool} changes something; the token of {caller.name} does not allow it "
                    f"(vikingbot api token add {caller.name} --scope mcp-write)"
                )
            result = await getattr(self, f"_{tool}")(**args)
        except VikingbotError as exc:
            await self._audit(caller, tool, subject, "refused", str(exc))
            raise
        except Exception as exc:
            await self._audit(caller, tool, subject, "error", f"{type(exc).__name__}: {exc}")
            raise
        await self._audit(caller, tool, subject, "ok", None)
        return result

    async def _audit(
        self, caller: Caller, tool: str, subject: str, outcome: str, reason: str | None
    ) -> None:
        actor = f"mcp:{caller.name}"
        await asyncio.to_thread(self.audit, actor, f"mcp.{tool}", subject, outcome, reason)

    # ------------------------------------------------------------------ tools

    async def _read_inbox(
        self, slot: str | None = None, unread_only: bool = True, limit: int = 20
    ) -> list[dict[str, Any]]:
        return await self.inbox(slot, unread_only, max(1, min(int(limit), 200)))

    async def _heartbeat_plan(self, workspace: str | None = None) -> dict[str, Any]:
        if workspace is not None:
            self._workspace(workspace)
        return await self.plan(workspace)

    async def _add_heartbeat_entry(self, workspace: str, text: str) -> dict[str, Any]:
        path = self._workspace(workspace) / "HEARTBEAT.md"
        body = _text(text)
        await asyncio.to_thread(locked_edit, path, lambda old: add_entry(old, body))
        return {"workspace": workspace, "added": body}

    async def _complete_heartbeat_entry(self, workspace: str, entry: str) -> dict[str, Any]:
        path = self._workspace(workspace) / "HEARTBEAT.md"
        wanted = _text(entry).strip()

        def complete() -> dict[str, Any]:
            text = path.read_text(encoding="utf-8-sig") if path.exists() else ""
            found = [
                e
                for e in parse_heartbeat(text).entries
                if not e.checked and wanted in (e.text.strip(), e.raw[0].strip())
            ]
            if len(found) != 1:
                what = "no open entry" if not found else f"{len(found)} open entries"
                raise McpRefused(f"{what} in {workspace}/HEARTBEAT.md read {wanted[:200]!r}")
            key = found[0].key
            report = apply_moves(path, [Complete(key, self.clock.now().date())])
            if report.skipped:
                raise HeartbeatError(f"not completed: {report.skipped[0][1]}")
            return {"workspace": workspace, "completed": found[0].text}

        return await asyncio.to_thread(complete)

    async def _run_heartbeat_now(self, workspace: str | None = None) -> Any:
        if workspace is not None:
            self._workspace(workspace)
        return await self.run_now(workspace)

    async def _message_owner(self, text: str) -> dict[str, Any]:
        return await self.tell_owner(_text(text))

    async def _search_history(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        q = _text(query)
        return await asyncio.to_thread(self.search, q, max(1, min(int(limit), 50)))

    def _workspace(self, name: str) -> Path:
        root = self.workspace_root
        if (
            not isinstance(name, str)
            or not name
            or "/" in name
            or "\\" in name
            or name.startswith(".")
            or not (root / name).is_dir()
        ):
            known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            raise McpRefused(
                f"no workspace {str(name)[:100]!r} (known: {', '.join(known) or 'none'})"
            )
        return root / name


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise McpRefused("a non-empty text is needed")
    if len(value) > MAX_TEXT:
        raise McpRefused(f"the text is {len(value)} characters; the limit is {MAX_TEXT}")
    return value
