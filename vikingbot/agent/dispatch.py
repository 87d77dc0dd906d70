"""Run one turn and always get text back: a failure becomes a sentence, not an exception.

Chat answers, dashboard prompts and cron jobs all need the same thing: run the
agent, and if it cannot (no provider, the provider failing, a crash in a tool
loop) say so in words the user reads. :func:`run_turn_text` is that helper.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loguru import logger

from vikingbot.errors import VikingbotError
from vikingbot.redact import mask_text

if TYPE_CHECKING:
    from vikingbot.agent.types import AgentLoop, TurnResult
    from vikingbot.session.types import SessionKey
    from vikingbot.tools.base import Deliver


@dataclass
class TurnText:
    """What a turn produced: the reply (or the failure as text) and the raw result."""

    text: str
    result: TurnResult | None
    error: str | None = None  # set when the turn failed; ``text`` then explains it

    @property
    def failed(self) -> bool:
        return self.error is not None


async def run_turn_text(
    agent: AgentLoop | None,
    prompt: str,
    key: SessionKey,
    metadata: dict[str, Any] | None = None,
    *,
    deliver: Deliver | None = None,
    problem: str | None = None,
    failure: str = "Sorry, that failed: {}",
) -> TurnText:
    """Run a turn; a missing provider (``problem``) or any failure becomes ``failure`` text.

    Cancellation is not a failure: it propagates (the gateway is stopping).
    """
    if problem is not None or agent is None:
        why = mask_text(problem or "no agent configured")
        return TurnText(failure.format(why), None, why)
    try:
        result = await agent.run_turn(prompt, key, metadata or {}, deliver=deliver)
    except asyncio.CancelledError:
        raise
    except VikingbotError as exc:  # the text reaches a chat: no secret a provider echoed
        why = mask_text(str(exc))
        return TurnText(failure.format(why), None, why)
    except Exception as exc:  # a bug in a loop plugin must not kill the dispatcher
        logger.exception("turn in {} crashed", key)
        why = mask_text(f"{type(exc).__name__}: {exc}")
        return TurnText(failure.format(why), None, why)
    if result.ended in ("error", "timeout"):
        why = mask_text(result.error or f"the turn ended with {result.ended}")
        return TurnText(failure.format(why), result, why)
    return TurnText(result.text or "", result)


def turn_json(key: SessionKey, r: TurnResult) -> dict[str, Any]:
    """A chat turn as `vikingbot chat -m --json` prints it."""
    return {
        "session": str(key),
        "reply": r.text,
        "ended": r.ended,
        "error": r.error,
        "tool_calls": [
            {
                "name": c.name,
                "arguments": c.arguments,
                "approved": c.approved,
                "error": c.error,
                "result": c.result[:1000],
            }
            for c in r.tool_calls
        ],
        "messages_sent": r.messages_sent,
        "model_calls": r.model_calls,
        "tokens_in": r.tokens_in,
        "tokens_out": r.tokens_out,
        "cost_usd": round(r.cost_usd, 6),
        # the last request's size in characters: system, memory, summary, recent, tools
        "request_chars": dict(r.request_chars),
        "model": r.model,
    }
