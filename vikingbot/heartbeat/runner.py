"""Running the heartbeat's turns for one workspace and acting on their replies.

Per unit: ask the entry's checker (``only-if:``) and compare signatures, call
the agent with a timeout, classify the reply (no-op, HEARTBEAT_KEEP, result,
error), deliver, move completed entries, count retries and continuations,
park what keeps failing and tell the owner once, account tokens against the
budget, and recycle the dedicated heartbeat session.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.heartbeat.planner import Decision, WorkspaceInput, budget_exceeded, session_skip
from vikingbot.heartbeat.prompts import CHECKLIST_PROMPT, task_prompt
from vikingbot.heartbeat.state import EntryState, LedgerRow, text_hash
from vikingbot.replies import is_noop, strip_tokens, wants_keep
from vikingbot.session.types import SessionMeta

if TYPE_CHECKING:
    from vikingbot.agent.types import TurnResult
    from vikingbot.heartbeat.service import CycleReport, HeartbeatService
    from vikingbot.heartbeat.types import Entry
    from vikingbot.tools.base import DeliveryStatus


@dataclass
class _Turn:
    result: TurnResult | None
    outcome: str
    error: str | None
    duration_s: float
    delivered: int


class UnitRunner:
    def __init__(self, svc: HeartbeatService, report: CycleReport, trigger: str) -> None:
        self.svc = svc
        self.report = report
        self.trigger = trigger

    # ------------------------------------------------------------ workspace

    async def run_workspace(self, wsin: WorkspaceInput, todo: list[Decision]) -> None:
        from vikingbot.heartbeat.rewrite import apply_moves

        svc = self.svc
        log = logger.bind(workspace=wsin.name)
        path = svc.workspace_path(wsin.name)
        # the cycle's time, not when this workspace got its turn behind others: the
        # cadence stays on the tick rhythm however long the queue was
        now = self.report.started_at
        eligible = [m for m in wsin.sessions if session_skip(m, now, svc.cfg.stale_after) is None]
        hb_key = svc.heartbeat_session_key(wsin.name)
        moves: list[Any] = []
        rows: list[LedgerRow] = []
        ws = wsin.state
        for d in todo:
            if svc._stopping:
                break
            row, unit_moves = await self.run_unit(wsin, d, eligible, path)
            rows.append(row)
            moves += unit_moves
        if moves:
            try:
                rep = await asyncio.to_thread(apply_moves, path / "HEARTBEAT.md", moves)
                log.info("HEARTBEAT.md updated: {}", rep)
            except Exception:
                log.exception("could not update HEARTBEAT.md; the entries stay as they are")
        ran = [r for r in rows if r.decision == "run"]
        today = now.astimezone(svc.tz()).date().isoformat()
        if ws.budget_day != today:
            ws.budget_day, ws.tokens_today, ws.cost_today = today, 0, 0.0
        for r in ran:
            ws.tokens_today += r.tokens_in + r.tokens_out
            ws.cost_today += r.cost_usd
        if any(d.unit is not None and d.unit.kind == "checklist" for d in todo):
            ws.last_checklist_at = now
        if rows:
            last = rows[-1]
            ws.last_decision, ws.last_reason, ws.last_decision_at = last.decision, last.reason, now
        if ran:
            ws.last_outcome, ws.last_run_at = ran[-1].outcome, now
            ws.hb_session_prompts += len(ran)
            if self._should_recycle(ws.hb_session_prompts, ran):
                await asyncio.to_thread(svc.rt.sessions.reset, hb_key)
                ws.hb_session_prompts = 0
                ws.hb_session_generation += 1
                log.info("heartbeat session recycled")
        if budget_exceeded(svc.cfg, ws, today) and not ws.paused:
            from vikingbot.heartbeat.service import budget_text

            ws.paused, ws.paused_reason, ws.paused_at = True, "budget", now
            await svc._notify(wsin.name, "budget", budget_text(wsin.name))
        # written with the rest of the cycle's results in one transaction (see run_cycle);
        # the in-memory state is current at once, so the next plan sees it
        svc.state.cache_workspace(ws)
        recorded = [r for r in rows if svc.keep_row(r)]  # checker skips fold like the planner's
        self.report.finished.append((recorded, ws))
        self.report.rows.extend(rows)

    def _should_recycle(self, prompts: int, ran: list[LedgerRow]) -> bool:
        cfg = self.svc.cfg
        if prompts >= cfg.session_max_prompts:
            return True
        window = self.svc.rt.config.bot.agents.context_window
        last = ran[-1]
        if last.model_calls:
            context = last.tokens_in / last.model_calls
            return context > cfg.session_context_ratio * window
        return False

    # ------------------------------------------------------------ unit

    async def run_unit(
        self, wsin: WorkspaceInput, d: Decision, eligible: list[SessionMeta], path: Path
    ) -> tuple[LedgerRow, list[Any]]:
        from vikingbot.heartbeat.rewrite import Complete, Delete, Park, Unpark

        svc = self.svc
        cfg = svc.cfg
        unit = d.unit
        assert unit is not None
        entry = unit.entry
        now = self.report.started_at  # the cycle's time keeps every entry on the tick rhythm
        log = logger.bind(workspace=wsin.name, entry=entry.key if entry else None)
        row = LedgerRow(
            cycle_id=self.report.cycle_id,
            at=now,
            workspace=wsin.name,
            trigger=self.trigger,
            decision="run",
            reason=d.reason,
            session=d.session,
            entry=entry.key if entry else None,
        )
        moves: list[Any] = []
        st: EntryState | None = None
        if entry is not None:
            st = wsin.entries.get(entry.key) or EntryState(wsin.name, entry.key, first_seen=now)
            if entry.parked is not None or st.parked_reason is not None:
                # the user edited a parked entry (or removed its mark): it starts afresh
                if entry.parked is not None:
                    moves.append(Unpark(entry.key))
                st.parked_reason = st.parked_text_hash = None
                st.retries = st.continuations = 0

        context = None
        checker = None
        if entry is not None and st is not None and entry.only_if and not unit.continuation:
            check = await self._check(entry)
            checker = entry.only_if
            if not check.has_work or (
                check.signature is not None and check.signature == st.signature
            ):
                st.last_fired = now
                await asyncio.to_thread(svc.state.save_entry, st)
                row.decision = "skip"
                row.reason = "no-work" if not check.has_work else "unchanged"
                row.error = check.error
                if svc.metrics:
                    svc.metrics.heartbeat_skips.labels(row.reason).inc()
                return row, moves
            if check.signature is not None:
                st.signature = check.signature  # stored before the run
            context = check.context

        if st is not None:
            st.running_since = now
            await asyncio.to_thread(svc.state.save_entry, st)

        turn = await self._turn(wsin, unit, entry, eligible, path, context, log)
        row.outcome = turn.outcome
        row.duration_s = turn.duration_s
        row.error = turn.error
        if turn.result is not None:
            r = turn.result
            row.model_calls, row.tokens_in, row.tokens_out, row.cost_usd = (
                r.model_calls,
                r.tokens_in,
                r.tokens_out,
                r.cost_usd,
            )

        if entry is not None and st is not None:
            st.running_since = None
            st.last_fired = now
            st.last_outcome = turn.outcome
            failed = turn.outcome in ("error", "timeout")
            if failed:
                st.retries += 1
                st.signature = None  # a failed run clears the watermark: the next tick retries
                if st.retries >= cfg.max_retries:
                    reason = f"failed {st.retries} times: {turn.error or turn.outcome}"
                    moves.append(Park(entry.key, reason[:200]))
                    st.parked_reason, st.parked_text_hash = reason, text_hash(entry.text)
                    await svc._notify(
                        wsin.name,
                        "parked",
                        f"Heartbeat entry '{entry.key}' in workspace {wsin.name} is parked after "
                        f"{st.retries} failed runs ({turn.error or turn.outcome}). Edit the entry "
                        "in HEARTBEAT.md to run it again.",
                    )
            else:
                st.retries = 0
            if unit.kind == "task" and turn.outcome in (
                "completed",
                "delivered",
                "inboxed",
                "ok-empty",
                "silent",
            ):
                when = now.astimezone(svc.tz()).date()
                # expect: only move the entry as this cycle read it (a note added meanwhile stays)
                moves.append(
                    Delete(entry.key, expect=entry.raw)
                    if cfg.on_complete == "delete"
                    else Complete(entry.key, when, expect=entry.raw)
                )
                if turn.outcome not in ("delivered", "inboxed"):
                    row.outcome = "completed"
            if unit.kind == "scheduled" and not failed:
                if turn.outcome == "kept":
                    st.continuations += 1
                    st.continue_next = True
                    if st.continuations >= cfg.max_continuations:
                        reason = f"asked to continue {st.continuations} times in a row"
                        moves.append(Park(entry.key, reason))
                        st.parked_reason, st.parked_text_hash = reason, text_hash(entry.text)
                        st.continue_next = False
                        await svc._notify(
                            wsin.name,
                            "parked",
                            f"Scheduled entry '{entry.key}' in workspace {wsin.name} is parked: it "
                            f"{reason}. Edit the entry in HEARTBEAT.md to run it again.",
                        )
                else:
                    st.continuations = 0
                    st.continue_next = False
            moved = checker is not None and not failed and turn.result is not None
            if moved and self._moved_signature(entry, turn):
                again = await self._check(entry)
                if not again.error:
                    st.signature = again.signature
            await asyncio.to_thread(svc.state.save_entry, st)

        if svc.metrics:
            svc.metrics.heartbeat_runs.labels(row.outcome or "unknown").inc()
            svc.metrics.model_calls.labels("heartbeat").inc(row.model_calls)
            svc.metrics.tokens.labels("heartbeat", "in").inc(row.tokens_in)
            svc.metrics.tokens.labels("heartbeat", "out").inc(row.tokens_out)
            svc.metrics.turn_duration.labels("heartbeat").observe(row.duration_s or 0.0)
        log.info("heartbeat {} -> {} ({} model calls)", unit.kind, row.outcome, row.model_calls)
        return row, moves

    def _moved_signature(self, entry: Entry, turn: _Turn) -> bool:
        """Did this run do a write of its own that the checker would see?"""
        assert entry.only_if is not None and turn.result is not None
        conf = self.svc.cfg.checkers.get(entry.only_if[0])
        tools = set(turn.result.tools_run)
        if turn.delivered:
            tools.add("message")
        if conf is not None and conf.moves_signature is not None:
            return bool(tools & set(conf.moves_signature))
        return turn.result.wrote or turn.delivered > 0

    async def _check(self, entry: Entry) -> Any:
        from vikingbot.heartbeat.checkers import run_check

        assert entry.only_if is not None
        name, scope = entry.only_if
        return await run_check(
            name,
            scope,
            self.svc.cfg.checkers,
            state_dir=self.svc.rt.paths.data_dir / "checkers",
            environ=self.svc.rt.environ,
        )

    # ------------------------------------------------------------ the turn

    async def _turn(
        self,
        wsin: WorkspaceInput,
        unit: Any,
        entry: Entry | None,
        eligible: list[SessionMeta],
        path: Path,
        context: str | None,
        log: Any,
    ) -> _Turn:
        svc = self.svc
        cfg = svc.cfg
        run_id = f"hb-{self.report.cycle_id}-{uuid.uuid4().hex[:8]}"
        default = (entry.deliver if entry is not None and entry.deliver else None) or cfg.target
        sessions = eligible
        if unit.session is not None:  # fan-out: this session only
            default, sessions = "last", [unit.session]
        sent = silenced = attempts = inboxed = 0

        async def deliver(text: str, target: str | None = None) -> DeliveryStatus:
            nonlocal sent, silenced, attempts, inboxed
            attempts += 1
            report = await svc.rt.delivery.deliver(
                text,
                target or default,
                sessions=sessions,
                dedupe_key=f"{run_id}:{attempts}",
                source=f"heartbeat:{wsin.name}",
            )
            if report.skipped == "silent":  # target none/silent: ledger and log only
                silenced += 1
                return "delivered"  # the user asked for silence: nothing is owed
            if report.status == "delivered":
                sent += 1
            elif report.status == "inboxed":  # kept for the user, but no channel took it
                inboxed += 1
            return report.status

        def finished(default: str) -> str:
            if sent:
                return "delivered"
            return "inboxed" if inboxed else ("silent" if silenced else default)

        if unit.kind == "checklist":
            prompt = CHECKLIST_PROMPT
        else:
            assert entry is not None
            prompt = task_prompt(entry.prompt_text, title=entry.title, context=context)
        metadata: dict[str, Any] = {
            "heartbeat": True,
            "unattended": True,
            "workspace": str(path),
            "run_id": run_id,
            "entry": entry.key if entry is not None else None,
        }
        hb_key = svc.heartbeat_session_key(wsin.name)
        t0 = time.monotonic()
        try:
            result = await asyncio.wait_for(
                svc.agent().run_turn(prompt, hb_key, metadata, deliver=deliver),
                timeout=cfg.task_timeout_s,
            )
        except TimeoutError:
            log.warning("heartbeat turn timed out after {}s; session reset", cfg.task_timeout_s)
            await asyncio.to_thread(svc.rt.sessions.reset, hb_key)
            return _Turn(
                None,
                "timeout",
                f"timed out after {cfg.task_timeout_s:g}s",
                time.monotonic() - t0,
                sent + inboxed,
            )
        except VikingbotError as exc:
            log.error("heartbeat turn failed: {}", exc)
            return _Turn(None, "error", str(exc), time.monotonic() - t0, sent + inboxed)
        except Exception as exc:
            log.exception("heartbeat turn crashed")
            return _Turn(
                None, "error", f"{type(exc).__name__}: {exc}", time.monotonic() - t0, sent + inboxed
            )
        duration = time.monotonic() - t0
        if result.ended in ("error", "timeout"):
            return _Turn(result, result.ended, result.error, duration, sent + inboxed)
        reply = result.text
        if wants_keep(reply) or (result.ended == "turn-limit" and unit.kind != "checklist"):
            return _Turn(result, "kept", None, duration, sent + inboxed)
        if is_noop(reply, cfg.ack_max_chars):
            return _Turn(result, finished("ok-empty"), None, duration, sent + inboxed)
        if not attempts and reply and strip_tokens(reply):
            await deliver(reply)  # a result without the message tool still reaches the user
        return _Turn(result, finished("completed"), None, duration, sent + inboxed)
