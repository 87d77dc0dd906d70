"""vikingbot's side of ACP: what the agent may ask of us while a turn runs.

``AcpClient`` implements the SDK's ``Client`` protocol for every session of one
agent process; each request is routed to the ``AcpTurn`` of its session:

- ``session/update``: agent text chunks become the reply (capped at
  ``bot.agents.acp.max_update_chars``; the rest is counted and reported); tool
  calls and their results are recorded as ``ToolCallRecord`` so ``tools_run``,
  ``wrote`` and the ledger stay true (kinds ``read``, ``search``, ``think``,
  ``fetch`` are read-only; any other kind that completes means the turn wrote);
- ``session/request_permission``: the approval policy decides by the request's
  ``kind`` (``approval.acp_action``: ``read`` counts as ``read_file``,
  ``execute`` as ``exec``, ...); the title the agent picks may only narrow.
  Unattended turns approve only kinds whose tool ``bot.heartbeat.safe_tools``
  names; chat asks the person when it can. Every decision is audited, with
  kind and title, by the approval module;
- ``fs/read_text_file`` / ``fs/write_text_file``: confined to the turn's
  workspace (a path outside is refused, naming the path; a read may also reach
  the user's skills folder, which ``.claude/skills`` links to); reads go through
  ``agentio.read_capped`` in the turn's I/O lane (a pipe, socket or device is
  refused without blocking; at most ``MAX_READ_BYTES``); writes go through
  the ``write_file`` tool, so HEARTBEAT.md takes the heartbeat's own lock. A
  refusal is one warning line and a JSON-RPC error, never a traceback;
- a request for a session with no turn running is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.agent.approval import READ_ONLY_KINDS, Approver, acp_action
from vikingbot.agent.types import ApprovalCallback, ToolCallRecord, ToolObserver
from vikingbot.agentio import read_capped
from vikingbot.errors import ToolError
from vikingbot.tools.fs import WriteFileTool
from vikingbot.tools.paths import resolve_in, shown
from vikingbot.tools.registry import tool_names

if TYPE_CHECKING:
    from vikingbot.agent.history import TurnLog
    from vikingbot.config.schema import Config
    from vikingbot.tools.base import ToolContext

MAX_READ_BYTES = 4 * 1024 * 1024


@dataclass
class AcpTurn:
    """One running turn of one ACP session."""

    log: TurnLog
    ctx: ToolContext
    max_chars: int
    chunks: list[str] = field(default_factory=list)
    chars: int = 0
    dropped: int = 0
    updates: int = 0
    calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)

    def add_text(self, text: str) -> None:
        room = self.max_chars - self.chars
        if room <= 0:
            self.dropped += len(text)
            return
        self.chunks.append(text[:room])
        self.chars += min(len(text), room)
        self.dropped += max(0, len(text) - room)

    def text(self) -> str:
        out = "".join(self.chunks)
        if self.dropped:
            out += (
                f"\n\n[the agent sent {self.dropped} more characters; not kept "
                "(bot.agents.acp.max_update_chars)]"
            )
        return out


def _text_of(content: Any) -> str:
    """The text of an ACP content block (or of a tool call's content list)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(t for t in (_text_of(c) for c in content) if t)
    inner = getattr(content, "content", None)
    if inner is not None and not isinstance(content, str):
        return _text_of(inner)
    text = getattr(content, "text", None)
    if isinstance(text, str):
        return text
    if getattr(content, "type", None) == "diff":
        return f"(edited {getattr(content, 'path', '?')})"
    return ""


class AcpClient:
    """The ``acp.Client`` for one agent process (routing by ACP session id)."""

    def __init__(
        self,
        config: Config,
        *,
        store: Any,
        approval_callback: ApprovalCallback | None,
        on_tool_call: ToolObserver | None,
    ) -> None:
        self.config = config
        self.store = store
        self.approval_callback = approval_callback
        self.on_tool_call = on_tool_call
        self.turns: dict[str, AcpTurn] = {}
        self.known_tools = frozenset(tool_names())

    def _turn(self, session_id: str) -> AcpTurn:
        from acp import RequestError

        turn = self.turns.get(session_id)
        if turn is None:
            raise RequestError.invalid_params({"details": f"no turn is running in {session_id}"})
        return turn

    # ------------------------------------------------------------ updates

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self.turns.get(session_id)
        if turn is None:
            return  # a late update after the turn ended: nothing to add it to
        turn.updates += 1
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk":
            turn.add_text(_text_of(update.content))
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_update(turn, update)

    def _tool_update(self, turn: AcpTurn, update: Any) -> None:
        call_id = str(update.tool_call_id)
        rec = turn.calls.get(call_id)
        if rec is None:
            if len(turn.calls) >= 1000:
                return  # a flood of tool calls: the first thousand are recorded
            kind = str(update.kind or "other")
            rec = ToolCallRecord(
                name=str(update.title or kind)[:200],
                arguments=update.raw_input if isinstance(update.raw_input, dict) else {},
                result="",
                read_only=kind in READ_ONLY_KINDS,
                approved=True,  # the agent ran it; refusals are recorded at permission time
            )
            turn.calls[call_id] = rec
            turn.kinds[call_id] = kind
            turn.log.result.tool_calls.append(rec)
        if update.title and update.session_update == "tool_call_update":
            rec.name = str(update.title)[:200]
        if update.content:
            rec.result = _text_of(update.content)[:10_000]
        if update.status in ("completed", "failed"):
            rec.error = update.status == "failed"
            if not rec.error and not rec.read_only:
                turn.log.result.wrote = True
            if self.on_tool_call is not None:
                self.on_tool_call(rec)

    # -------------------------------------------------------- permissions

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        turn = self._turn(session_id)
        action = acp_action(tool_call.kind, tool_call.title)
        title = action.title
        args = tool_call.raw_input if isinstance(tool_call.raw_input, dict) else {"title": title}
        approver = Approver(self.config, store=self.store, callback=self.approval_callback)
        decision = await approver.check(
            action,
            args,
            session=str(turn.log.key),
            metadata=turn.log.metadata,
            turn_id=turn.log.turn_id,
            known=self.known_tools,
        )
        wanted = (
            ("allow_once", "allow_always")
            if decision.approved
            else ("reject_once", "reject_always")
        )
        option = next((o for k in wanted for o in options if o.kind == k), None)
        if not decision.approved:
            name = title or str(action.kind)
            rec = ToolCallRecord(name, args, f"refused: {decision.reason}", action.read_only, False)
            turn.log.result.tool_calls.append(rec)
            if self.on_tool_call is not None:
                self.on_tool_call(rec)
        if option is None:  # no option of the kind we need: cancelling is a refusal
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    # ----------------------------------------------------------------- fs

    def _path(self, turn: AcpTurn, raw: str, *, reading: bool = False) -> Path:
        from acp import RequestError

        try:
            return resolve_in(turn.ctx.workspace, raw, restrict=True)
        except (ToolError, OSError, ValueError) as exc:  # outside, a NUL byte, a symlink loop
            skill = self._user_skill(turn, raw) if reading else None
            if skill is not None:
                return skill
            turn.log.log.warning("acp: refused the path {!r}: {}", raw[:300], exc)
            raise RequestError.invalid_params({"details": str(exc)}) from None

    @staticmethod
    def _user_skill(turn: AcpTurn, raw: str) -> Path | None:
        """A read inside the user's skills folder (the workspace's ``.claude/skills`` links
        point there): allowed, read-only; ``None`` for anything else."""
        root = turn.ctx.user_skills
        if root is None or not isinstance(raw, str) or "\0" in raw:
            return None
        path = Path(raw) if Path(raw).is_absolute() else turn.ctx.workspace / raw
        resolved, top = path.resolve(), root.resolve()
        return resolved if resolved.is_relative_to(top) and resolved != top else None

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp import RequestError
        from acp.schema import ReadTextFileResponse

        turn = self._turn(session_id)
        target = self._path(turn, path, reading=True)
        label = shown(turn.ctx.workspace, target)
        try:
            data = await turn.ctx.io.run(read_capped, target, label, MAX_READ_BYTES)
        except (ToolError, OSError) as exc:
            turn.log.log.warning("acp: fs/read_text_file refused: {}", exc)
            raise RequestError.invalid_params({"details": str(exc)}) from None
        text = data.decode("utf-8", "replace")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            end = start + limit if limit is not None and limit >= 0 else None
            text = "".join(lines[start:end])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp import RequestError
        from acp.schema import WriteTextFileResponse

        turn = self._turn(session_id)
        target = self._path(turn, path)
        try:
            await WriteFileTool().run({"path": str(target), "content": content}, turn.ctx)
        except (ToolError, OSError, ValueError) as exc:
            turn.log.log.warning("acp: fs/write_text_file refused: {}", exc)
            raise RequestError.invalid_params({"details": str(exc)}) from None
        turn.log.result.wrote = True
        return WriteTextFileResponse()

    # --------------------------------------------------------- not offered

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        from acp import RequestError

        raise RequestError.method_not_found("terminal/create (vikingbot offers no terminal)")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from acp import RequestError

        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None
