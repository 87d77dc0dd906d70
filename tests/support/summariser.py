"""A scripted model that summarises what it is given: markers (``MARK-<n>``) survive.

Used as a fake model server's ``responder``: a compaction request (its system
prompt is ``agent.compact.SUMMARY_SYSTEM``) or a memory pass (``memory.consolidate``)
is answered with every marker found in the request, so a test can see whether an
early turn's fact reached a later request; any other request gets a short reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from vikingbot.testing.fake_llm import RecordedRequest, Step, reply

MARK = re.compile(r"MARK-\d+")
SUMMARY_START = "You condense a conversation"
MEMORY_START = "You keep the long-term memory"


def markers(text: str) -> list[str]:
    """The markers in ``text``, each once, in order of first appearance."""
    return list(dict.fromkeys(MARK.findall(text)))


def kind(request: RecordedRequest) -> str:
    """``summary``, ``memory`` or ``chat``: what a request asks of the model."""
    system = request.system
    if system.startswith(SUMMARY_START):
        return "summary"
    if system.startswith(MEMORY_START):
        return "memory"
    return "chat"


def summariser(
    chat: Callable[[RecordedRequest], Step | str] | None = None,
) -> Callable[[RecordedRequest], Step | str]:
    """A responder: summaries and memory passes keep the markers; chat turns get ``chat``'s
    answer (default a short ``ok``)."""

    def answer(request: RecordedRequest) -> Step | str:
        what = kind(request)
        if what == "summary":
            return reply("- facts: " + " ".join(markers(request.last_user_text)))
        if what == "memory":
            found = markers(request.last_user_text)
            body = "\n".join(f"- remembered {m}" for m in found) or "- nothing yet"
            return reply(f"=== MEMORY.md\n# Memory\n\n{body}\n=== USER.md\n# User\n")
        return chat(request) if chat is not None else reply("ok")

    return answer
