"""The request a turn sends, kept within budget: reads the session, folds it when needed.

``TurnContext`` holds one turn's request in parts (system prompt, memory, summary,
recent turns, the turn's own messages, tools) so it can measure them
(``breakdown``, shown by ``status`` and ``chat --json``) and rebuild the request
after a fold. ``Compactor`` does the I/O around the pure rules of
``agent.compact``: it reads the session, asks a model for a summary and appends
the summary entry. ``compact_session`` is the same fold asked for by hand
(``/compact``, ``vikingbot sessions compact KEY``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.agent import compact
from vikingbot.agent.context import history_messages
from vikingbot.errors import VikingbotError
from vikingbot.providers.base import ChatMessage, ChatRequest
from vikingbot.session.types import Message, SessionKey

if TYPE_CHECKING:
    from vikingbot.agent.types import TurnResult
    from vikingbot.clock import Clock
    from vikingbot.config.schema import Config
    from vikingbot.providers.base import Provider
    from vikingbot.session.store import SessionStore
    from vikingbot.toolschema import ToolSchema

PARTS = ("system", "memory", "summary", "recent", "tools")
SUMMARY_SHARE = 0.15  # of the budget: the summary's size cap


@dataclass
class TurnContext:
    """One turn's request in parts. ``turn`` is the prompt and this turn's steps."""

    system: str  # the system prompt without memory or summary
    memory: str  # the memory files' sections of the system prompt
    summary: str | None
    recent: list[Message]
    tools: list[ToolSchema]
    seen: int  # the session's message count when it was read
    turn: list[ChatMessage] = field(default_factory=list)
    cut_before: int = 0  # tool results in recent before this index are cut

    def history(self) -> list[ChatMessage]:
        return history_messages(compact.cut_tool_results(self.recent, self.cut_before))

    def system_text(self) -> str:
        return compact.with_summary(self.system + self.memory, self.summary)

    def messages(self) -> list[ChatMessage]:
        return [ChatMessage("system", self.system_text()), *self.history(), *self.turn]

    def breakdown(self) -> dict[str, int]:
        """Characters of the request by part (the turn's own messages count as recent)."""
        summary = len(self.system_text()) - len(self.system) - len(self.memory)
        recent = sum(compact.message_chars(m) for m in [*self.history(), *self.turn])
        tools = sum(len(json.dumps(_schema(t), ensure_ascii=False)) for t in self.tools)
        return {
            "system": len(self.system),
            "memory": len(self.memory),
            "summary": summary,
            "recent": recent,
            "tools": tools,
        }

    def cut_turn(self) -> bool:
        """Cut this turn's tool results except the newest round; whether any was cut."""
        last = max((i for i, m in enumerate(self.turn) if m.role == "assistant"), default=-1)
        changed = False
        for i, m in enumerate(self.turn[:last]):
            if m.role == "tool" and len(m.content) > compact.TOOL_STUB_CHARS + 80:
                cut = len(m.content) - compact.TOOL_STUB_CHARS
                text = m.content[: compact.TOOL_STUB_CHARS] + f"\n[... {cut} characters cut]"
                self.turn[i] = replace(m, content=text)
                changed = True
        return changed

    def size(self) -> int:
        return sum(self.breakdown().values())


def _schema(t: ToolSchema) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "parameters": t.parameters}


class Compactor:
    """Keeps a turn's request within ``bot.agents`` budget (see ``agent.compact``)."""

    def __init__(self, config: Config, sessions: SessionStore, clock: Clock) -> None:
        self.config = config
        self.sessions = sessions
        self.clock = clock

    @property
    def summary_limit(self) -> int:
        """The summary's size cap in characters (``SUMMARY_SHARE`` of the budget)."""
        return max(500, int(self.budget * SUMMARY_SHARE))

    @property
    def budget(self) -> int:
        agents = self.config.bot.agents
        return compact.budget_chars(agents.context_window, agents.compact_at)

    def load(self, key: SessionKey) -> tuple[compact.Split, int]:
        """The session's newest summary and the messages after it; and the message count."""
        seen, newest_first = self.sessions.read_back(key)
        return compact.split_back(newest_first), seen

    async def fit(
        self,
        ctx: TurnContext,
        key: SessionKey,
        provider: Provider,
        model: str,
        result: TurnResult,
        *,
        force: bool = False,
    ) -> bool:
        """Bring ``ctx`` within budget (``force``: the provider said "too long").

        Returns whether anything changed. Cuts old tool results first, then folds.
        """
        agents = self.config.bot.agents
        budget = self.budget
        changed = False
        # tool results before the newest turn of history (forced: all of history's)
        newest = len(ctx.recent) if force else compact.last_user(ctx.recent)
        if (force or ctx.size() > budget) and ctx.cut_before < newest:
            ctx.cut_before = newest
            changed = True
        fixed = ctx.size() - sum(compact.message_chars(m) for m in ctx.history())
        # what stays verbatim leaves half the free room to grow into (no fold every turn)
        free = budget - (fixed - len(ctx.summary or "")) - self.summary_limit
        keep = min(int(budget * agents.compact_keep), max(0, free // 2))
        if not force and fixed - len(ctx.summary or "") + self.summary_limit >= budget:
            # the system prompt and tools alone fill the budget: folding cannot help, and
            # would cost a call every turn; the provider's "too long" answer still folds
            logger.bind(session=str(key)).warning(
                "the system prompt and tools of {} pass the budget ({} characters); "
                "raise bot.agents.context_window or compact_at",
                key,
                budget,
            )
            return changed
        if force:
            cut = len(ctx.recent)  # everything before this turn
        else:
            cut = compact.plan_fold(
                compact.cut_tool_results(ctx.recent, ctx.cut_before),
                fixed=fixed,
                budget=budget,
                keep=keep,
                max_messages=agents.history_window,
            )
        if cut <= 0:
            return changed
        await self.fold(ctx, key, provider, model, cut, result)
        return True

    async def fold(
        self,
        ctx: TurnContext,
        key: SessionKey,
        provider: Provider,
        model: str,
        cut: int,
        result: TurnResult | None = None,
    ) -> None:
        """Fold ``ctx.recent[:cut]`` into a new summary (a model call) and record it."""
        agents = self.config.bot.agents
        limit = self.summary_limit
        folded = compact.cut_tool_results(ctx.recent[:cut], cut)
        use = agents.compact_model or model
        request = ChatRequest(
            model=use,
            messages=compact.summary_messages(ctx.summary, folded, limit),
            tools=[],
            max_tokens=min(agents.max_tokens, limit // compact.CHARS_PER_TOKEN + 256),
        )
        log = logger.bind(session=str(key))
        try:
            resp = await provider.complete(request)
        except VikingbotError as exc:  # the turn still goes on, with the old turns left out
            log.warning("compaction of {} failed ({}); older turns left out this time", key, exc)
            ctx.recent = ctx.recent[cut:]
            ctx.cut_before = max(0, ctx.cut_before - cut)
            return
        finally:
            if result is not None:
                result.model_calls += 1
        if result is not None:
            result.tokens_in += resp.tokens_in
            result.tokens_out += resp.tokens_out
            result.cost_usd += provider.cost(resp.tokens_in, resp.tokens_out, model=use)
        summary = compact.clean_summary(resp.text, limit)
        kept = len(ctx.recent) - cut
        now = self.clock.now()

        def entry(extra: int) -> Message:
            return compact.summary_entry(
                summary, kept=kept + extra, folded=cut, when=now, model=use
            )

        await asyncio.to_thread(self.sessions.append_counted, key, ctx.seen, entry)
        ctx.seen += 1
        ctx.summary = summary
        ctx.recent = ctx.recent[cut:]
        ctx.cut_before = max(0, ctx.cut_before - cut)
        log.info("compacted {}: {} messages folded into a summary, {} kept", key, cut, kept)


async def compact_session(
    compactor: Compactor, key: SessionKey, provider: Provider, model: str
) -> str:
    """Fold a session by hand (``/compact``, ``vikingbot sessions compact``): everything but
    the newest turn goes into the summary. Returns what happened, for the user."""
    split, seen = compactor.load(key)
    cut = compact.last_user(split.recent)
    if cut <= 0 or cut >= len(split.recent):
        return f"nothing to compact in {key}: {len(split.recent)} message(s) after the summary"
    ctx = TurnContext("", "", split.summary, split.recent, [], seen)
    await compactor.fold(ctx, key, provider, model, cut)
    if ctx.summary == split.summary:
        return f"compaction of {key} failed (see the log); nothing was changed"
    return (
        f"compacted {key}: {cut} message(s) folded into a summary of "
        f"{len(ctx.summary or '')} characters; {len(ctx.recent)} kept as they are"
    )
