"""The ``command`` provider kind: a local program answers (another agent's CLI, say).

The program (``bot.providers.<name>.command``, an argv list) gets the rendered
conversation on stdin (format in ``render_prompt``); its stdout, trimmed, is the
reply. It runs through ``vikingbot.proc``: in its own process group, bounded by
``timeout_s`` (on timeout, or when the turn is cancelled, the whole group is
killed), its reply capped at ``max_output_bytes`` (a cut reply says so). Such a program is an
agent of its own, so no tool schemas are sent and no tool calls come back.
Token counts are estimates (4 characters a token).

A program that is missing or cannot be started, gives no answer within
``timeout_s``, or is killed by a signal raises ``ProviderUnavailable`` (an
outage, like an unreachable model API: the heartbeat records provider-down and
tells the owner once down and once back); a program that exits with an error
status raises ``ProviderError`` (a failure of this request).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from vikingbot import proc
from vikingbot.errors import NotConfiguredError, ProviderError, ProviderUnavailable, SpawnError
from vikingbot.providers.base import (
    BaseProvider,
    ChatMessage,
    ChatRequest,
    ProviderResponse,
    estimate_tokens,
)

if TYPE_CHECKING:
    from vikingbot.config.schema import ProviderConfig

_LABEL = {"user": "User", "assistant": "Assistant", "tool": "Tool result"}


def render_prompt(messages: list[ChatMessage]) -> str:
    """The text a command provider reads on stdin.

    ``# System`` (the system prompt), ``# Conversation`` (earlier messages, each
    under ``## User`` / ``## Assistant`` / ``## Tool result (name)``) and
    ``# Message`` (the last user message: what to answer now). Empty sections
    are left out.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    convo = [m for m in messages if m.role != "system"]
    last = ""
    if convo and convo[-1].role == "user":
        last = convo.pop().content
    parts: list[str] = []
    if system:
        parts.append(f"# System\n\n{system}")
    if convo:
        lines = ["# Conversation"]
        for m in convo:
            label = _LABEL.get(m.role, m.role)
            if m.role == "tool" and m.name:
                label = f"{label} ({m.name})"
            text = m.content
            if m.tool_calls:
                called = ", ".join(c.name for c in m.tool_calls)
                text = f"{text}\n(called: {called})".strip()
            lines.append(f"## {label}\n\n{text}")
        parts.append("\n\n".join(lines))
    parts.append(f"# Message\n\n{last}")
    return "\n\n".join(parts) + "\n"


class CommandProvider(BaseProvider):
    kind = "command"
    needs_model = False

    def __init__(
        self, name: str, config: ProviderConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(name, config, environ=environ)

    def problem(self, model: str | None) -> str | None:
        argv = list(self.config.command or [])
        if not argv or not argv[0]:
            return (
                f"the {self.name} provider has no command; set bot.providers.{self.name}.command, "
                'e.g. ["my-agent", "--print"]'
            )
        if proc.which(argv[0], self.environ) is None:
            return (
                f"the {self.name} provider's program {argv[0]!r} was not found (or is not "
                f"executable); check bot.providers.{self.name}.command and PATH"
            )
        return None

    def _argv(self) -> list[str]:
        argv = list(self.config.command or [])
        if not argv or not argv[0]:
            raise NotConfiguredError(
                f"the {self.name} provider has no command; set bot.providers.{self.name}.command, "
                'e.g. ["my-agent", "--print"]'
            )
        argv[0] = os.path.expanduser(argv[0])
        return argv

    async def complete(self, request: ChatRequest) -> ProviderResponse:
        argv = self._argv()
        prompt = render_prompt(request.messages)
        env = dict(self.environ)
        env["VIKINGBOT_PROVIDER"] = self.name
        if request.model:
            env["VIKINGBOT_MODEL"] = request.model
        timeout = self.config.timeout_s
        try:
            done = await proc.run(
                argv,
                input=prompt.encode(),
                env=env,
                timeout_s=timeout,
                max_output=self.config.max_output_bytes,
            )
        except SpawnError as exc:
            if exc.missing:
                raise ProviderUnavailable(
                    f"the {self.name} provider's program {argv[0]!r} was not found; "
                    f"check bot.providers.{self.name}.command"
                ) from exc
            raise ProviderUnavailable(f"the {self.name} provider: {exc}") from exc
        if done.timed_out:
            raise ProviderUnavailable(
                f"the {self.name} provider's program {done.program!r} gave no answer "
                f"within {timeout:g}s and was killed; raise bot.providers.{self.name}.timeout_s"
            )
        code = done.returncode or 0
        if code < 0:  # killed by a signal (OOM killer, a crash): not its answer
            raise ProviderUnavailable(
                f"the {self.name} provider's program {done.program!r} was killed by signal {-code}"
            )
        if done.returncode != 0:
            tail = done.stderr_tail() or "(no error output)"
            raise ProviderError(
                f"the {self.name} provider's program {done.program!r} exited with "
                f"status {done.returncode}: {tail}"
            )
        text = done.text.strip()
        if done.stdout_dropped:
            text += (
                f"\n\n[reply cut: {done.stdout_dropped} more bytes were not kept; "
                f"raise bot.providers.{self.name}.max_output_bytes]"
            )
        return ProviderResponse(
            text=text,
            tokens_in=estimate_tokens(prompt),
            tokens_out=estimate_tokens(text),
            finish_reason="stop",
        )
