"""What the control API does, as plain functions over the gateway's services.

Each function returns JSON-ready data. The control routes call them in the
gateway; the CLI calls the same functions when no gateway runs, so the two paths
print the same JSON (plus ``"via"``). The dashboard reuses them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot import __version__

if TYPE_CHECKING:
    from vikingbot.bus import Attachment
    from vikingbot.cron.service import CronService
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.gateway.steering import Steering
    from vikingbot.heartbeat.service import HeartbeatService


# ---------------------------------------------------------------- heartbeat


async def heartbeat_run_now(
    svc: HeartbeatService, *, workspace: str | None, force: bool, entry: str | None = None
) -> list[dict[str, Any]]:
    """One manual cycle (the scheduled cadence is not moved; ``entry``: only that entry,
    scheduled or not); the `run-now --json` rows, each skip with ``detail``: the words
    `plan` shows for it, fix included; each with its ``name`` and ``next_due`` as `plan
    --json` has them (after the run)."""
    from vikingbot.heartbeat.planner import ledger_name
    from vikingbot.heartbeat.reasons import row_fix

    report = await svc.run_cycle("manual", workspace=workspace, force=force, entry=entry)
    fixes = _fix_context(svc)
    rows = [
        {**result, "name": ledger_name(result), "detail": row_fix(row, fixes)}
        for row, result in zip(report.rows, report.results(), strict=True)
    ]
    names = sorted({r["workspace"] for r in rows if r["workspace"] != "*"})
    after = await asyncio.to_thread(_next_dues, svc, names)
    return [{**r, "next_due": after.get((r["workspace"], r["name"]))} for r in rows]


def _next_dues(svc: HeartbeatService, workspaces: list[str]) -> dict[tuple[str, str], str]:
    """(workspace, name) -> when `plan` says it is next due, for these workspaces."""
    from vikingbot.heartbeat.planner import subject

    out: dict[tuple[str, str], str] = {}
    for name in workspaces:
        decisions, _ = svc.plan("scheduled", workspace=name)
        out.update(
            {(d.workspace, subject(d)): d.next_due.isoformat() for d in decisions if d.next_due}
        )
    return out


def _fix_context(svc: HeartbeatService) -> Any:
    from vikingbot.heartbeat.reasons import FixContext

    return FixContext(svc.workspace_root, svc.cfg.stale_after, _outbound_only(svc))


def _outbound_only(svc: HeartbeatService) -> frozenset[str]:
    """The configured channels nobody writes in (push notifications)."""
    from vikingbot import registry
    from vikingbot.errors import VikingbotError

    out = set()
    for name, section in svc.settings().bot.channels.sections().items():
        if not section.enabled:  # only the running ones are imported
            continue
        try:
            cls = registry.load("channels", name)
        except (VikingbotError, ImportError):
            continue
        if getattr(cls, "outbound_only", False):
            out.add(name)
    return frozenset(out)


def heartbeat_plan(svc: HeartbeatService, workspace: str | None) -> dict[str, Any]:
    """What a cycle would do now: every decision (the `plan --json` rows), the number of
    workspaces looked at, and the HEARTBEAT.md problems."""
    from vikingbot.heartbeat.reasons import with_fix

    decisions, inputs = svc.plan("scheduled", workspace=workspace)
    fixes = _fix_context(svc)
    return {
        "decisions": [decision_json(d, with_fix(d, fixes), _model_of(svc, d)) for d in decisions],
        "workspaces": len(inputs),
        "problems": svc.problems(inputs, decisions),
    }


def _model_of(svc: HeartbeatService, d: Any) -> str | None:
    """``provider / model`` a unit would run with (None for a decision without a unit)."""
    from vikingbot.heartbeat.turn import shown_model

    return shown_model(svc.settings(), d.unit.entry) if d.unit is not None else None


def decision_json(d: Any, detail: str | None = None, model: str | None = None) -> dict[str, Any]:
    """One planner decision as `heartbeat plan --json` prints it (``detail``: with its fix;
    ``model``: the provider and model a unit would use)."""
    from vikingbot.heartbeat.planner import subject

    return {
        "workspace": d.workspace,
        "session": d.session,
        "entry": d.entry,
        "name": subject(d),  # what listings call it: session, entry or "checklist"
        "decision": d.decision,
        "reason": d.reason,
        "detail": detail if detail is not None else d.detail,
        "next_due": d.next_due.isoformat() if d.next_due else None,
        "model": model,
    }


def heartbeat_status(svc: HeartbeatService, agent_problem: str | None) -> dict[str, Any]:
    """The `heartbeat status --json` object."""
    cfg = svc.cfg
    decisions, inputs = svc.plan("scheduled")  # reads the rows it plans again
    states = svc.state.all_workspaces()
    g = svc.state.workspace("*")
    next_cycle = (
        (g.last_cycle_at + timedelta(seconds=cfg.interval_seconds)) if g.last_cycle_at else None
    )
    workspaces: list[dict[str, Any]] = []
    names = sorted({w.name for w in inputs} | {n for n in states if n != "*"})
    for name in names:
        ws = states.get(name)
        mine = [d for d in decisions if d.workspace == name]
        dues = [d.next_due for d in mine if d.next_due is not None]
        running = any(d.decision == "run" for d in mine)
        workspaces.append(
            {
                "workspace": name,
                "paused": bool(ws and ws.paused),
                "paused_reason": ws.paused_reason if ws else None,
                "last_outcome": ws.last_outcome if ws else None,
                "last_run_at": ws.last_run_at.isoformat() if ws and ws.last_run_at else None,
                "last_decision": ws.last_decision if ws else None,
                "last_reason": ws.last_reason if ws else None,
                "next_due": "now" if running else (min(dues).isoformat() if dues else None),
                "now": [d.reason for d in mine if d.session is None][-1:] or None,
                "tokens_today": ws.tokens_today if ws else 0,
                "cost_today": ws.cost_today if ws else 0.0,
            }
        )
    return {
        "enabled": cfg.enabled,
        "interval_seconds": cfg.interval_seconds,
        "mode": cfg.mode,
        "target": cfg.target,
        "last_cycle_at": g.last_cycle_at.isoformat() if g.last_cycle_at else None,
        "next_cycle_at": next_cycle.isoformat() if next_cycle and cfg.enabled else None,
        "agent_problem": agent_problem,
        "workspaces": workspaces,
        "problems": svc.problems(inputs, decisions),
    }


def known_workspace(root: Path, name: str) -> str | None:
    """None when ``name`` is a workspace under ``root``; else what is wrong."""
    if "/" in name or "\\" in name or name.startswith(".") or not (root / name).is_dir():
        known = (
            ", ".join(sorted(p.name for p in root.iterdir() if p.is_dir())) if root.is_dir() else ""
        )
        return f"no workspace {name!r} under {root} (known: {known or 'none'})"
    return None


def set_heartbeat_enabled(config_file: Path, value: bool) -> dict[str, Any]:
    from vikingbot.config.edit import set_value

    set_value(config_file, "bot.heartbeat.enabled", value)
    return {"enabled": value, "config": str(config_file)}


# ---------------------------------------------------------------- inbox


def inbox_list(inbox: Inbox, *, slot: str | None, unread: bool, limit: int) -> list[dict[str, Any]]:
    items = inbox.items(unread_only=unread, slot=slot, limit=limit)
    return [_item_json(i.as_dict()) for i in items]


def _item_json(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in d.items()}


# ---------------------------------------------------------------- the gateway's binding


@dataclass
class ControlOps:
    """The control API's view of a running gateway (built by the composition root)."""

    heartbeat: HeartbeatService
    inbox: Inbox
    config_file: Path
    workspace_root: Path
    agent_problem: Callable[[], str | None]
    wake_heartbeat: Callable[[], None]
    cron: CronService | None = None
    # (text, session, attachments): a control-API chat turn, files taken in first
    chat_turn: Callable[..., Awaitable[dict[str, Any]]] | None = None
    steering: Steering | None = None  # the terminal's approvals (chat/answer)
    services: Callable[[], dict[str, Any]] = dict
    started_at: str = ""
    host: str = ""
    port: int = 0
    inbox_changed: asyncio.Event = field(default_factory=asyncio.Event)
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)  # requests being served
    #: re-read the config now; what was applied (``gateway/applying.Report.as_dict``)
    reload_config: Callable[[], Awaitable[dict[str, Any]]] | None = None

    def gateway_info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": __version__,
            "started_at": self.started_at,
            "host": self.host,
            "port": self.port,
            "services": self.services(),
        }

    async def config_apply(self) -> dict[str, Any]:
        """Re-read the config and apply it; the answer says what was applied (issue 42)."""
        if self.reload_config is None:
            from vikingbot.gateway.errors import NotFound

            raise NotFound("this gateway cannot reload its config")
        return await self.reload_config()

    async def heartbeat_plan(self, workspace: str | None) -> dict[str, Any]:
        return await asyncio.to_thread(heartbeat_plan, self.heartbeat, workspace)

    async def heartbeat_status(self) -> dict[str, Any]:
        return await asyncio.to_thread(heartbeat_status, self.heartbeat, self.agent_problem())

    async def heartbeat_run_now(
        self, *, workspace: str | None, force: bool, entry: str | None = None
    ) -> Any:
        rows = await heartbeat_run_now(
            self.heartbeat, workspace=workspace, force=force, entry=entry
        )
        self.inbox_changed.set()
        return {"results": rows, "agent_problem": self.agent_problem()}

    async def heartbeat_set_enabled(self, value: bool) -> dict[str, Any]:
        data = await asyncio.to_thread(set_heartbeat_enabled, self.config_file, value)
        if self.reload_config is not None:  # applied before the answer (issue 42)
            await self.reload_config()
        else:
            self.wake_heartbeat()  # the config watcher applies the edit; wake the loop now
        return data

    async def heartbeat_pause(self, workspace: str) -> dict[str, Any]:
        from vikingbot.gateway.errors import NotFound

        problem = known_workspace(self.workspace_root, workspace)
        if problem:
            raise NotFound(problem)
        await asyncio.to_thread(self.heartbeat.pause, workspace)
        self.wake_heartbeat()
        return {"workspace": workspace, "paused": True}

    async def heartbeat_resume(self, workspace: str) -> dict[str, Any]:
        from vikingbot.gateway.errors import NotFound

        problem = known_workspace(self.workspace_root, workspace)
        if problem:
            raise NotFound(problem)
        await asyncio.to_thread(self.heartbeat.resume, workspace)
        self.wake_heartbeat()
        return {"workspace": workspace, "paused": False}

    async def pair(self, verb: str, code: str) -> dict[str, Any]:
        """``list``, ``approve CODE`` or ``deny CODE`` (``vikingbot pair``, the dashboard)."""
        from vikingbot.gateway.errors import NotFound

        if self.steering is None or self.steering.pairing_desk is None:
            raise NotFound("pairing is not available in this gateway")
        return await self.steering.pairing_desk.act(verb, code)

    async def cron_run(self, name: str) -> dict[str, Any]:
        from vikingbot.gateway.errors import NotFound

        if self.cron is None:
            raise NotFound("cron is not running in this gateway")
        problem = self.agent_problem()
        if problem:
            from vikingbot.errors import CronError

            raise CronError(f"cannot run {name!r}: {problem}")
        run = await self.cron.run_now(name)
        self.inbox_changed.set()
        return run.to_dict()

    async def inbox_list(self, *, slot: str | None, unread: bool, limit: int) -> Any:
        return await asyncio.to_thread(
            inbox_list, self.inbox, slot=slot, unread=unread, limit=limit
        )

    async def inbox_mark_read(self, *, ids: list[int] | None, slot: str | None) -> Any:
        if ids is None and slot is not None:
            items = await asyncio.to_thread(self.inbox.items, slot=slot)
            ids = [i.id for i in items]
        changed = await asyncio.to_thread(self.inbox.mark_read, ids)
        return {"marked": changed}

    async def chat(
        self, text: str, *, session: str, attachments: tuple[Attachment, ...] = ()
    ) -> dict[str, Any]:
        from vikingbot.errors import SessionError
        from vikingbot.gateway.errors import BadRequest, NotFound

        if self.chat_turn is None:
            raise NotFound("chat is not available in this gateway")
        try:
            return await self.chat_turn(text, session, attachments)
        except SessionError as exc:
            raise BadRequest(f"'session': {exc}") from None

    async def events(self, *, after: int, wait_s: int) -> dict[str, Any]:
        """Inbox items newer than ``after`` (waiting up to ``wait_s`` for one)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        items = await asyncio.to_thread(self.inbox.items_after, after, 100)
        while not items and loop.time() < deadline:
            # woken by this gateway's own results; the 1 s poll catches the rest
            self.inbox_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.inbox_changed.wait(), timeout=min(1.0, deadline - loop.time())
                )
            items = await asyncio.to_thread(self.inbox.items_after, after, 100)
        rows = [_item_json(i.as_dict()) for i in items]
        last = max([after, *(int(r["id"]) for r in rows)])
        return {"items": rows, "last": last}
