"""The ``command`` provider kind: a local program answers (another agent's CLI, say).

The program (``bot.providers.<name>.command``, an argv list) gets the rendered
conversation on stdin (format in ``render_prompt``); its stdout, trimmed, is the
reply. It runs in its own process group, bounded by ``timeout_s``: on timeout,
or when the turn is cancelled, the whole group is killed. Such a program is an
agent of its own, so no tool schemas are sent and no tool calls come back.
Token counts are estimates (4 characters a token).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vikingbot.errors import NotConfiguredError, ProviderError, ProviderNotFoundError
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
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ProviderNotFoundError(
                f"the {self.name} provider's program {argv[0]!r} was not found; "
                f"check bot.providers.{self.name}.command"
            ) from exc
        except PermissionError as exc:
            raise ProviderError(
                f"the {self.name} provider's program {argv[0]!r} is not executable"
            ) from exc
        timeout = self.config.timeout_s
        try:
            out, err = await asyncio.wait_for(proc.communicate(prompt.encode()), timeout)
        except TimeoutError:
            await _kill(proc)
            raise ProviderError(
                f"the {self.name} provider's program {Path(argv[0]).name!r} gave no answer "
                f"within {timeout:g}s and was killed; raise bot.providers.{self.name}.timeout_s"
            ) from None
        except asyncio.CancelledError:
            await _kill(proc)
            raise
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip()[-500:] or "(no error output)"
            raise ProviderError(
                f"the {self.name} provider's program {Path(argv[0]).name!r} exited with "
                f"status {proc.returncode}: {tail}"
            )
        text = out.decode(errors="replace").strip()
        return ProviderResponse(
            text=text,
            tokens_in=estimate_tokens(prompt),
            tokens_out=estimate_tokens(text),
            finish_reason="stop",
        )


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
