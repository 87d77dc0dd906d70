"""One heartbeat turn: the prompt, the agent call, and delivery of what it produced.

``Turns.make`` builds the prompt (the fixed checklist text, or the entry's task
with the checker's context), calls the agent with a timeout, and records what
delivery made of every send (``delivery.adapter.TurnDelivery``), so
``outcome.settle`` can name the outcome honestly (delivered, inboxed, refused,
silent). Provider outages are
told apart from failures here: a ``ProviderUnavailable`` raised, or a turn that
ended on one (``TurnResult.provider_down``), is ``provider-down``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot import telemetry
from vikingbot.agentio import Lane
from vikingbot.config.schema import Config
from vikingbot.delivery.adapter import TurnDelivery
from vikingbot.errors import ProviderUnavailable, VikingbotError
from vikingbot.heartbeat.outcome import TurnFacts, needs_reply_delivery, reply_kind
from vikingbot.heartbeat.prompts import checklist_prompt, task_prompt, task_state
from vikingbot.heartbeat.types import Entry, EntryState, Unit
from vikingbot.session.types import SessionKey, SessionMeta
from vikingbot.skills.discover import catalog
from vikingbot.skills.prompt import skill_text
from vikingbot.tools.base import Deliver

if TYPE_CHECKING:
    from vikingbot.agent.types import TurnRunner
    from vikingbot.providers.base import ImagePart

    # (workspace, entry text) -> the pictures it names inside the workspace, ready for
    # the model, and a line for the prompt per picture named (media/workspace_images.py)
    Pictures = Callable[[Path, str], Awaitable[tuple[list[ImagePart], list[str]]]]
    from vikingbot.delivery.service import DeliveryService


def heartbeat_session_key(workspace: str) -> SessionKey:
    return SessionKey("heartbeat", "hb", workspace)


def run_identity(unit_key: str, running_since: datetime) -> str:
    """The run id of an entry's run, the same when a crash makes it run again.

    A run cut off by a crash keeps its ``running_since`` (``outcome.fresh_state``), so
    the repeat gets this same id, and what it sends gets the dedupe keys the first
    attempt used: the outbox does not send a result the owner already has.
    """
    digest = hashlib.sha256(f"{unit_key}@{running_since.isoformat()}".encode()).hexdigest()
    return f"hb-{digest[:20]}"


def turn_model(config: Config, entry: Entry | None) -> tuple[str | None, str | None]:
    """(provider, model) a heartbeat turn asks for: ``bot.heartbeat.provider`` and the
    entry's ``model:`` (checked by the parser) or ``bot.heartbeat.model``; ``None`` leaves
    the loop's own (``bot.agents.*``)."""
    hb = config.bot.heartbeat
    return hb.provider, (entry.model if entry is not None else None) or hb.model


def shown_model(config: Config, entry: Entry | None) -> str:
    """What `heartbeat plan` says a unit would use: ``provider / model``."""
    provider, model = turn_model(config, entry)
    agents = config.bot.agents
    return f"{provider or agents.provider or '(no provider)'} / {model or agents.model or '(no model)'}"


class Turns:
    """The heartbeat's side of a turn: run it on the agent (``agent``, a ``TurnRunner``),
    deliver what it produced (``delivery``), reset the heartbeat session (``reset``); the
    skills folder an entry's ``skill:`` is looked up in besides the workspace's own.

    ``settings`` is read at each turn (a reloaded config applies to the next one)."""

    def __init__(
        self,
        settings: Callable[[], Config],
        *,
        agent: TurnRunner,
        delivery: DeliveryService,
        reset: Callable[[SessionKey], object],
        user_skills: Path,
        pictures: Pictures | None = None,
    ) -> None:
        self.pictures = pictures  # the images an entry names in its workspace (media)
        self.settings = settings
        self.agent = agent
        self.delivery = delivery
        self.reset = reset
        self.user_skills = user_skills

    async def reset_session(self, workspace: str) -> None:
        """Start the workspace's heartbeat session afresh."""
        await asyncio.to_thread(self.reset, heartbeat_session_key(workspace))

    def delivered_before(self, run_id: str) -> list[str]:
        """What a run with this identity already handed to delivery, oldest first (its
        sends are keyed ``<run_id>:...``: :class:`~vikingbot.delivery.adapter.TurnDelivery`)."""
        return self.delivery.outbox.texts_of_run(run_id)

    async def make(
        self,
        cycle_id: str,
        workspace: str,
        unit: Unit,
        eligible: list[SessionMeta],
        path: Path,
        context: str | None,
        run_id: str | None = None,
        *,
        fence: Callable[[str], Awaitable[None]] | None = None,
        tasks: Sequence[Entry] = (),
        state: EntryState | None = None,
    ) -> TurnFacts:
        """One heartbeat turn (:meth:`_make`), traced as ``heartbeat.run`` with the
        decision that led to it (``heartbeat.decide``) and the agent's turn inside."""
        entry = unit.entry.ident if unit.entry is not None else None
        attrs = {"vikingbot.workspace": workspace, "vikingbot.heartbeat.entry": entry}
        with telemetry.span(
            "heartbeat.run", {**attrs, "vikingbot.heartbeat.cycle": cycle_id}
        ) as sp:
            with telemetry.span(
                "heartbeat.decide",
                {
                    **attrs,
                    "vikingbot.heartbeat.decision": "run",
                    "vikingbot.heartbeat.unit": unit.kind,
                    "vikingbot.heartbeat.continuation": unit.continuation,
                    "vikingbot.heartbeat.slot": unit.slot.isoformat() if unit.slot else None,
                },
            ):
                pass
            facts = await self._make(
                cycle_id,
                workspace,
                unit,
                eligible,
                path,
                context,
                run_id,
                fence=fence,
                tasks=tasks,
                state=state,
            )
            sp.set("vikingbot.heartbeat.ended", facts.ended)
            sp.set("vikingbot.model", facts.model)
            if facts.error:
                sp.fail(facts.error)
            return facts

    async def _make(
        self,
        cycle_id: str,
        workspace: str,
        unit: Unit,
        eligible: list[SessionMeta],
        path: Path,
        context: str | None,
        run_id: str | None = None,
        *,
        fence: Callable[[str], Awaitable[None]] | None = None,
        tasks: Sequence[Entry] = (),
        state: EntryState | None = None,
    ) -> TurnFacts:
        """One heartbeat turn: prompt, agent call, the plain reply delivered when the agent
        sent nothing itself; what happened, as ``TurnFacts`` for ``settle``.

        With ``run_id`` (an entry's :func:`run_identity`) each send's dedupe key is the run
        id, the text's digest and its count in this run, so a repeat after a crash that
        sends the same text again is not sent twice; without, the n-th send's key.

        ``fence`` is awaited before every send; it raises ``LeaseLost`` when another
        gateway has taken the unit over meanwhile (``claims.Fence``), so a late finisher
        delivers nothing.

        ``tasks`` (a checklist turn) are the open entries of HEARTBEAT.md the plan was made
        from and ``state`` (an entry's turn) what the heartbeat remembers of the entry: both
        travel in the prompt (``prompts``), so the agent need not read the file first."""
        config = self.settings()
        cfg = config.bot.heartbeat
        entry = unit.entry
        stable = run_id is not None
        run_id = run_id or f"hb-{cycle_id}-{uuid.uuid4().hex[:8]}"
        target = (entry.deliver if entry is not None and entry.deliver else None) or cfg.target
        sessions = eligible
        if unit.session is not None:  # fan-out: this session only
            target, sessions = "last", [unit.session]
        deliver = TurnDelivery(
            self.delivery,
            source=f"heartbeat:{workspace}",
            target=target,
            sessions=sessions,
            run_id=run_id,
            stable_keys=stable,
            fence=fence,
            repeat_within_s=cfg.repeat_window,
        )
        cap = cfg.max_file_bytes
        prompt = (
            checklist_prompt(tasks, max_bytes=cap)
            if entry is None
            else task_prompt(
                entry.prompt_text,
                title=entry.title,
                context=context,
                state=task_state(entry, state, max_bytes=cap),
                skill=await self._skill(path, entry.skill) if entry.skill else None,
            )
        )
        shown: list[ImagePart] = []
        if self.pictures is not None:  # pictures named in the workspace (docs/media.md)
            named = entry.prompt_text if entry is not None else "\n".join(t.text for t in tasks)
            shown, lines = await self.pictures(path, named)
            prompt = "\n".join([prompt, *lines])
        metadata: dict[str, Any] = {
            **({"images": shown, "workspace_images": True} if shown else {}),
            "heartbeat": True,
            "unattended": True,
            "workspace": str(path),
            "run_id": run_id,
            "entry": entry.ident if entry is not None else None,
        }
        provider, model = turn_model(config, entry)
        if provider:
            metadata["provider"] = provider
        if model:
            metadata["model"] = model
        facts = await self._call(workspace, prompt, metadata, deliver)
        if facts.ended != "reply":
            return replace(facts, sends=tuple(deliver.sends))
        kind = reply_kind(
            facts.reply,
            turn_limit=facts.turn_limit,
            unit=unit,
            ack_max_chars=cfg.ack_max_chars,
        )
        facts = replace(facts, sends=tuple(deliver.sends))
        if needs_reply_delivery(facts, kind):
            await deliver(facts.reply or "")  # a result without the message tool still arrives
        return replace(facts, sends=tuple(deliver.sends))

    async def _skill(self, workspace: Path, name: str) -> str:
        """The text of the skill an entry names, as the workspace sees it now."""

        def load() -> str:
            found = catalog(workspace=workspace, user=self.user_skills)
            skill = found.get(name)
            if skill is None:  # removed since the plan
                return f"(The entry names skill {name}, which is not installed any more.)"
            return skill_text(skill)

        return await Lane().run(load)

    async def _call(
        self, workspace: str, prompt: str, metadata: dict[str, Any], deliver: Deliver
    ) -> TurnFacts:
        """The agent's turn, bounded by ``task_timeout_s``; an outage is told apart from a failure."""
        log = logger.bind(workspace=workspace, entry=metadata.get("entry"))
        hb_key = heartbeat_session_key(workspace)
        timeout = self.settings().bot.heartbeat.task_timeout_s
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(timeout):  # not wait_for (3.11 can lose a cancel)
                result = await self.agent.run_turn(prompt, hb_key, metadata, deliver=deliver)
        except TimeoutError:
            log.warning("heartbeat turn timed out after {}s; session reset", timeout)
            await self.reset_session(workspace)
            return TurnFacts(
                "timeout", error=f"timed out after {timeout:g}s", duration_s=time.monotonic() - t0
            )
        except ProviderUnavailable as exc:
            log.warning("model provider unavailable: {}", exc)
            return TurnFacts("provider-down", error=str(exc), duration_s=time.monotonic() - t0)
        except VikingbotError as exc:
            log.error("heartbeat turn failed: {}", exc)
            return TurnFacts("failed", error=str(exc), duration_s=time.monotonic() - t0)
        except Exception as exc:
            log.exception("heartbeat turn crashed")
            return TurnFacts(
                "failed", error=f"{type(exc).__name__}: {exc}", duration_s=time.monotonic() - t0
            )
        ended = "reply"
        if result.ended in ("error", "timeout"):
            ended = (
                "provider-down"
                if result.provider_down
                else ("timeout" if result.ended == "timeout" else "failed")
            )
        return TurnFacts(
            ended,  # type: ignore[arg-type]
            reply=result.text,
            error=result.error,
            turn_limit=result.ended == "turn-limit",
            model_calls=result.model_calls,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            cost_usd=result.cost_usd,
            duration_s=time.monotonic() - t0,
            wrote=result.wrote,
            tools_run=tuple(result.tools_run),
            model=result.model,
        )
