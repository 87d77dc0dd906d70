"""The built-in chat commands, each written once (``COMMANDS``; ``registry()`` builds them)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vikingbot.commands import usage
from vikingbot.commands.registry import Command, Registry
from vikingbot.errors import VikingbotError

if TYPE_CHECKING:
    from vikingbot.commands.types import CommandCall
    from vikingbot.config.schema import Config

DEFAULT_WORDS = frozenset({"default", "reset", "-"})


def listed_models(config: Config) -> list[str]:
    """The models the config names: ``bot.agents.model``, ``bot.heartbeat.model`` and every
    model priced in a ``bot.providers.<name>.prices`` table (the ones ``/model`` may pick)."""
    found: list[str] = []
    for m in (config.bot.agents.model, config.bot.heartbeat.model):
        if m and m not in found:
            found.append(m)
    for section in config.bot.providers.values():
        for m in getattr(section, "prices", {}) or {}:
            if m not in found:
                found.append(m)
    return found


def chat_model(metadata: dict[str, Any], config: Config) -> str | None:
    """The model this chat chose with ``/model`` if the config still lists it, else None."""
    chosen = metadata.get("model")
    return chosen if isinstance(chosen, str) and chosen in listed_models(config) else None


async def _meta(call: CommandCall) -> dict[str, Any]:
    meta = await asyncio.to_thread(call.desk.sessions.get_or_create, call.key)
    return dict(meta.metadata)


async def cmd_help(call: CommandCall) -> str:
    return call.desk.registry.help(owner=call.owner)


async def cmd_new(call: CommandCall) -> str:
    stopped = call.desk.stop_turn(call.key)
    await asyncio.to_thread(call.desk.sessions.reset, call.key)
    return "New conversation started." + (" (The running turn was stopped.)" if stopped else "")


async def cmd_stop(call: CommandCall) -> str:
    return "Stopped." if call.desk.stop_turn(call.key) else "Nothing is running in this chat."


async def cmd_model(call: CommandCall) -> str:
    config = call.desk.config()
    models = listed_models(config)
    default = config.bot.agents.model or "the provider's default"
    if not call.args:
        here = chat_model(await _meta(call), config)
        choose = ", ".join(models) if models else "none listed (set bot.agents.model)"
        return (
            f"Model in this chat: {here or default}"
            + ("" if here else " (default)")
            + f". Choose with /model NAME from: {choose}"
        )
    wanted = call.args[0]
    await asyncio.to_thread(call.desk.sessions.get_or_create, call.key)
    if wanted.lower() in DEFAULT_WORDS:
        await asyncio.to_thread(call.desk.sessions.update_metadata, call.key, model=None)
        return f"This chat uses the default model again: {default}."
    if wanted not in models:
        known = ", ".join(models) if models else "none (the config lists no model)"
        return f"{wanted[:80]!r} is not a model the config lists. Choose from: {known}"
    await asyncio.to_thread(call.desk.sessions.update_metadata, call.key, model=wanted)
    return f"This chat now uses {wanted}."


async def _next_heartbeat(call: CommandCall) -> str:
    if call.desk.heartbeat is None:
        return "not running here"
    workspace = call.desk.workspace_of(call.key)
    try:
        plan = await call.desk.heartbeat.heartbeat_plan(workspace)
    except (VikingbotError, OSError) as exc:  # a command answers in words
        return f"unknown ({exc})"
    dues = sorted(d["next_due"] for d in plan.get("decisions", []) if d.get("next_due"))
    runs = [d for d in plan.get("decisions", []) if d.get("decision") == "run"]
    if runs:
        return f"due now in workspace {workspace} ({len(runs)} to run)"
    return f"next at {dues[0]} (workspace {workspace})" if dues else f"nothing due ({workspace})"


async def cmd_status(call: CommandCall) -> str:
    config = call.desk.config()
    meta = await _meta(call)
    count = await asyncio.to_thread(call.desk.sessions.message_count, call.key)
    model = chat_model(meta, config) or config.bot.agents.model or "the provider's default"
    last = meta.get("last_request")
    last_line = usage.line(usage.totals({"x": last}, "x")) if isinstance(last, dict) else "none yet"
    return "\n".join(
        [
            f"Session: {call.key} ({count} messages)",
            f"Model: {model}",
            f"Last request: {last_line}",
            f"Heartbeat: {await _next_heartbeat(call)}",
        ]
    )


async def cmd_usage(call: CommandCall) -> str:
    stored = (await _meta(call)).get("usage")
    today = datetime.now(UTC).date().isoformat()
    return (
        f"Today ({today}): {usage.line(usage.totals(stored, today))}\n"
        f"This month ({today[:7]}): {usage.line(usage.totals(stored, today[:7]))}"
    )


async def cmd_heartbeat(call: CommandCall) -> str:
    hb = call.desk.heartbeat
    verb = call.args[0].lower() if call.args else "plan"
    if hb is None:
        return "The heartbeat is not running in this gateway."
    workspace = call.desk.workspace_of(call.key)
    if verb == "plan":
        plan = await hb.heartbeat_plan(workspace)
        rows = [
            f"- {d.get('name')}: {d.get('decision')} ({d.get('reason')})"
            + (f", next {d['next_due']}" if d.get("next_due") else "")
            for d in plan.get("decisions", [])[:20]
        ]
        return "\n".join([f"Heartbeat plan for {workspace}:", *(rows or ["- nothing to do"])])
    if verb == "run":
        result = await hb.heartbeat_run_now(workspace=workspace, force=True)
        rows = result.get("results", []) if isinstance(result, dict) else []
        return f"Heartbeat ran in {workspace}: {len(rows)} unit(s)."
    if verb == "pause":
        await hb.heartbeat_pause(workspace)
        return f"Heartbeat paused in {workspace}."
    if verb == "resume":
        await hb.heartbeat_resume(workspace)
        return f"Heartbeat resumed in {workspace}."
    return "Usage: /heartbeat plan|run|pause|resume"


async def _answer(call: CommandCall, yes: bool) -> str:
    ident = call.args[0] if call.args else None
    return call.desk.approvals.answer(
        call.place, call.sender, owner=call.owner, yes=yes, ident=ident
    )


async def cmd_approve(call: CommandCall) -> str:
    return await _answer(call, True)


async def cmd_deny(call: CommandCall) -> str:
    return await _answer(call, False)


async def cmd_pair(call: CommandCall) -> str:
    if call.desk.pairing is None:
        return "Pairing is not available here."
    verb = call.args[0].lower() if call.args else "list"
    code = call.args[1] if len(call.args) > 1 else ""
    if verb not in ("list", "approve", "deny") or (verb != "list" and not code):
        return "Usage: /pair list | /pair approve CODE | /pair deny CODE"
    return await call.desk.pairing(call.place.split(":", 1)[0], verb, code)


COMMANDS: list[Command] = [
    Command("new", "Start a new conversation", cmd_new, aliases=("reset",)),
    Command("stop", "Stop the running turn", cmd_stop),
    Command("model", "Show or choose this chat's model", cmd_model, usage="[name|default]"),
    Command("status", "This chat's session, model, last request, heartbeat", cmd_status),
    Command("usage", "Today's and this month's tokens and cost here", cmd_usage),
    Command(
        "heartbeat",
        "Heartbeat of this chat's workspace",
        cmd_heartbeat,
        usage="plan|run|pause|resume",
        owner_only=True,
    ),
    Command("approve", "Allow the tool waiting for an answer", cmd_approve, usage="[id]"),
    Command("deny", "Refuse the tool waiting for an answer", cmd_deny, usage="[id]"),
    Command(
        "pair", "Let a new person in", cmd_pair, usage="list|approve|deny CODE", owner_only=True
    ),
    Command("help", "List the commands", cmd_help),
]


def registry() -> Registry:
    return Registry(COMMANDS)
