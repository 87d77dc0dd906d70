"""The ``acp`` loop: an external agent (Claude Code, Codex, Gemini CLI) answers over ACP.

``bot.agents.loop = "acp"`` with ``bot.agents.acp.command`` / ``args`` / ``env``
/ ``cwd`` / ``timeout_s`` (docs/agents.md has recipes). One agent process per
loop (per gateway), started on the first turn (or ``start()``) and restarted
with backoff after it dies (``acp_process``). One ACP session per vikingbot
session: created with ``session/new`` in the turn's workspace, resumed with
``session/load`` after a restart when the agent supports it, recreated
otherwise, and recreated when the vikingbot session was reset (the heartbeat
recycles its session that way).

A turn sends the prompt with ``session/prompt`` (the first prompt of an ACP
session carries vikingbot's context: the workspace files and the time, and for
background turns the unattended rules); the streamed text is the reply.
When the turn times out or is cancelled ``session/cancel`` is sent, and the
process is killed if the prompt has not ended ``CANCEL_GRACE_S`` later. An
agent that cannot start, or dies in the middle of a turn, ends the turn with
``TurnResult.provider_down`` set (an outage, as for the SDK providers: the
heartbeat records provider-down, charges no retry and tells the owner once down
and once back); an agent refusing the prompt is a plain failure. What
the agent asks of us is ``acp_client``'s; the lock, history and no-op rule are
``agent.history``'s, as for every loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot import proc
from vikingbot.agent.acp_client import AcpClient, AcpTurn
from vikingbot.agent.acp_mcp import session_servers
from vikingbot.agent.acp_process import NO_COMMAND, AgentProcess
from vikingbot.agent.context import read_context_files, system_prompt
from vikingbot.agent.history import TurnLog, run_locked, take_images, to_key
from vikingbot.agent.types import AgentLoop, Readiness, TurnResult
from vikingbot.errors import AgentError, NotConfiguredError, ProviderUnavailable, WorkspaceError
from vikingbot.session.types import SessionKey
from vikingbot.skills.agents import link_skills, shown_path
from vikingbot.skills.discover import catalog
from vikingbot.skills.prompt import listing
from vikingbot.tools.base import Deliver, ToolContext

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.providers.base import ImagePart
    from vikingbot.session.store import SessionStore

CANCEL_GRACE_S = 3.0


def rpc_error(exc: Exception) -> str:
    """A JSON-RPC error as one line: its message and, when given, its details."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and data.get("details"):
        data = data["details"]
    text = f"{exc}: {data}" if data else str(exc)
    return text[:500]


class AcpLoop(AgentLoop):
    """Turns answered by an ACP agent program (registered as ``acp`` in ``vikingbot.loops``)."""

    name = "acp"

    def __init__(self, config: Config, *, sessions: SessionStore, **parts: Any) -> None:
        super().__init__(config, sessions=sessions, **parts)
        self.client = AcpClient(
            config,
            store=self.store,
            approval_callback=self.approval_callback,
            on_tool_call=self.on_tool_call,
        )
        self.agent = AgentProcess(config.bot.agents.acp, self.environ, self.client)
        # vikingbot session -> (ACP session id, process generation, message count, updated_at)
        self._sessions: dict[SessionKey, tuple[str, int, int, str]] = {}
        self.cancel_grace_s = CANCEL_GRACE_S

    # ----------------------------------------------------------- contract

    def readiness(self) -> Readiness:
        cfg = self.config.bot.agents.acp
        if not cfg.command:
            return Readiness.missing(NO_COMMAND)
        detail = f"acp: {' '.join([Path(cfg.command).name, *cfg.args])[:120]}"
        if proc.which(cfg.command, self.environ) is None:
            return Readiness.missing(
                f"the ACP agent program {cfg.command!r} was not found on PATH (or is not "
                "executable); check bot.agents.acp.command (recipes: docs/agents.md)",
                detail,
            )
        if self.agent.deaths >= 3:
            return Readiness.missing(
                f"the ACP agent {self.agent.name!r} failed {self.agent.deaths} times in a row "
                f"(last: {self.agent.last_death}); vikingbot retries at the next turn",
                detail,
            )
        return Readiness.ok(detail)

    async def start(self) -> None:
        if self.readiness().ready:
            await self.agent.ensure(self._default_cwd())

    async def aclose(self) -> None:
        await self.agent.stop()

    def reconfigure(self, config: Config) -> None:
        old = self.config.bot.agents.acp
        super().reconfigure(config)
        self.client.config = config
        if config.bot.agents.acp != old:  # a changed agent: the next turn starts the new one
            self._retire()

    def environ_changed(self) -> None:
        """The agent program is started again at the next turn, with the new variables."""
        self._retire()

    def _retire(self) -> None:
        self.agent.config = self.config.bot.agents.acp
        self.agent.retired = True
        self._sessions.clear()

    # --------------------------------------------------------------- turn

    async def run_turn(
        self,
        prompt: str,
        session_key: SessionKey | str,
        metadata: dict[str, Any] | None = None,
        *,
        deliver: Deliver | None = None,
    ) -> TurnResult:
        key = to_key(session_key)
        meta = dict(metadata or {})
        images = take_images(meta)
        if not self.config.bot.agents.acp.command:
            raise NotConfiguredError(NO_COMMAND)
        workspace = self._workspace(key, meta)
        if not meta.get("timeout_s") and self.config.bot.agents.acp.timeout_s:
            meta["timeout_s"] = self.config.bot.agents.acp.timeout_s

        async def body(turn: TurnLog) -> None:
            ctx = ToolContext(
                workspace=workspace,
                session_key=key,
                config=self.config,
                bus=self.bus,
                metadata=meta,
                store=self.store,
                sessions=self.sessions,
                deliver=deliver,
                user_skills=self.user_skills,
                environ=self.environ,
                tell_owner=self.tell_owner,
            )
            turn.user(prompt)
            turn.result.model_calls = 1
            try:
                await self._prompt(turn, ctx, prompt, images)
            except (AgentError, ProviderUnavailable) as exc:
                turn.fail(str(exc))
                # an agent that cannot start or died mid-turn is an outage (provider-down)
                turn.result.provider_down = isinstance(exc, ProviderUnavailable)
                turn.log.error("turn {}: {}", turn.turn_id, exc)

        return await run_locked(self.config, self.sessions, self.clock, key, meta, body)

    async def _prompt(
        self, turn: TurnLog, ctx: ToolContext, prompt: str, images: list[ImagePart] | None = None
    ) -> None:
        from acp import RequestError, image_block, text_block

        cwd = Path(self.config.bot.agents.acp.cwd or ctx.workspace)
        skills = await ctx.io.run(self._skills, ctx.workspace, cwd)  # before a session starts
        conn = await self.agent.ensure(cwd)
        sid, fresh, news = await self._session(conn, turn.key, cwd, unattended=ctx.unattended)
        state = AcpTurn(turn, ctx, self.config.bot.agents.acp.max_update_chars)
        self.client.turns[sid] = state
        context = self._context(turn, ctx, fresh, skills)
        if news:
            context += "\n\nSince your last turn vikingbot sent the user this in this chat:\n" + (
                "\n---\n".join(news)
            )
        # pictures only to an agent that says it takes them (promptCapabilities.image);
        # before the prompt's text, which stays the last block
        shown = [image_block(i.b64(), i.mime) for i in images or [] if self.agent.takes_images]
        if images and not shown:
            turn.log.warning("the ACP agent does not take images: {} not sent", len(images))
            prompt += "\n(The picture could not be shown: this agent does not take images.)"
        blocks: list[Any] = [text_block(context), *shown, text_block(prompt)]
        task = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=blocks))
        try:
            resp = await self._answer(task)
        except asyncio.CancelledError:  # timed out or cancelled: ask the agent to stop
            await self._cancel(conn, sid, task)
            raise
        except RequestError as exc:
            raise AgentError(
                f"the ACP agent {self.agent.name!r} refused the prompt: {rpc_error(exc)}"
            ) from exc
        except (ConnectionError, OSError) as exc:
            why = await self.agent.crashed()
            raise ProviderUnavailable(
                f"the ACP agent {self.agent.name!r} stopped during the turn ({why}); "
                "the next turn starts it again"
            ) from exc
        finally:
            self.client.turns.pop(sid, None)
        self.agent.worked()
        if resp.usage is not None:
            turn.result.tokens_in = int(getattr(resp.usage, "input_tokens", 0) or 0)
            turn.result.tokens_out = int(getattr(resp.usage, "output_tokens", 0) or 0)
        stop = resp.stop_reason
        if stop == "refusal":
            turn.fail(f"the ACP agent {self.agent.name!r} refused to answer")
            return
        if stop in ("max_tokens", "max_turn_requests"):
            turn.result.ended = "turn-limit"
        turn.result.messages_sent = ctx.messages_sent
        turn.reply(state.text())

    async def _answer(self, task: asyncio.Future[Any]) -> Any:
        """The prompt's answer; a line that breaks the protocol ends the turn at once.

        The agent is stopped (the next turn starts a fresh one) and the turn ends
        with the documented error, instead of waiting for its timeout.
        """
        transport = self.agent.transport
        if transport is None:
            return await asyncio.shield(task)
        broken = asyncio.ensure_future(transport.garbage.seen.wait())
        try:
            await asyncio.wait({task, broken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            broken.cancel()
        if task.done():
            return task.result()
        note = transport.garbage.note()
        task.cancel()
        await self.agent.kill(f"killed: it {note}")
        self._sessions.clear()
        with contextlib.suppress(BaseException):
            await task
        raise ProviderUnavailable(
            f"the ACP agent {self.agent.name!r} {note}; the next turn starts it again"
        )

    async def _cancel(self, conn: Any, sid: str, task: asyncio.Future[Any]) -> None:
        with contextlib.suppress(Exception):
            await conn.cancel(session_id=sid)
        done, _ = await asyncio.wait({task}, timeout=self.cancel_grace_s)
        if not done:
            await self.agent.kill()
            self._sessions.clear()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    async def _session(
        self, conn: Any, key: SessionKey, cwd: Path, *, unattended: bool = False
    ) -> tuple[str, bool, list[str]]:
        """The ACP session for ``key``, whether it is new, and what vikingbot sent the user
        in this chat since the agent's last turn (delivered heartbeat or cron results).

        The common case (nothing touched the session since this loop's last turn) costs
        one header read: the message count is read only when ``updated_at`` moved.
        """
        from acp import RequestError

        known = self._sessions.get(key)
        stamp = await asyncio.to_thread(self._stamp, key)
        news: list[str] = []
        count = known[2] if known is not None else 0
        if known is None or known[3] != stamp:
            count = await asyncio.to_thread(self.sessions.message_count, key)
        if known is not None:
            sid, generation, seen, seen_stamp = known
            reset = count < seen or (count == seen == 0 and seen_stamp != stamp)
            if not reset:
                if count > seen:
                    news = await asyncio.to_thread(self._news, key, count - seen)
                self._sessions[key] = (sid, generation, count, stamp)
                if generation == self.agent.generation:
                    return sid, False, news
                if self.agent.load_session:
                    with contextlib.suppress(RequestError, ConnectionError):
                        servers = self._mcp_servers(unattended)
                        await conn.load_session(cwd=str(cwd), session_id=sid, mcp_servers=servers)
                        self._sessions[key] = (sid, self.agent.generation, count, stamp)
                        return sid, False, news
        try:
            resp = await conn.new_session(cwd=str(cwd), mcp_servers=self._mcp_servers(unattended))
        except RequestError as exc:
            raise AgentError(
                f"the ACP agent {self.agent.name!r} refused a new session: {rpc_error(exc)}"
            ) from exc
        self._sessions[key] = (resp.session_id, self.agent.generation, count, stamp)
        return resp.session_id, True, news

    def _mcp_servers(self, unattended: bool) -> list[Any]:
        """The configured MCP servers, as this agent can take them (docs/mcp.md)."""
        return session_servers(
            self.config, self.environ, unattended=unattended, transports=self.agent.mcp_transports
        )

    def _stamp(self, key: SessionKey) -> str:
        """The session's header time and file size: any write or reset changes it."""
        meta = self.sessions.get_or_create(key)
        try:
            size = self.sessions.path_for(key).stat().st_size
        except OSError:
            size = -1
        return f"{meta.updated_at.isoformat()}/{size}"

    def _news(self, key: SessionKey, n: int) -> list[str]:
        recent = self.sessions.read_messages(key, limit=n)
        return [m.content for m in recent if m.role == "assistant" and m.content.strip()]

    def _seen(self, key: SessionKey, turn: TurnLog) -> None:
        """Remember how the session looks after this loop's turn (to notice resets and news)."""
        known = self._sessions.get(key)
        if known is None or not turn.written:
            return
        self._sessions[key] = (known[0], known[1], known[2] + turn.written, self._stamp(key))

    def _skills(self, workspace: Path, cwd: Path) -> str | None:
        """The skill listing for the agent's context. When it works in the workspace, each
        skill is also linked where Claude Code looks (``skills.agents``); vikingbot writes
        nothing into a working folder of the user's own (``bot.agents.acp.cwd``)."""
        found = catalog(workspace=workspace, user=self.user_skills)
        linked = None
        if cwd == workspace:
            linked = link_skills(workspace, found, self.user_skills)
        return listing(found, where=lambda s: shown_path(s, linked, cwd))

    def _context(
        self, turn: TurnLog, ctx: ToolContext, fresh: bool, skills: str | None = None
    ) -> str:
        """vikingbot's context for the agent: all of it on a new session, the time after."""
        now = self.clock.now()
        if not fresh:
            return f"(vikingbot: it is now {now.isoformat(timespec='minutes')})"
        files = read_context_files(ctx.workspace)
        return system_prompt(
            ctx.workspace,
            files,
            now=now,
            timezone=self.config.bot.heartbeat.timezone,
            session_key=turn.key,
            metadata=turn.metadata,
            skills=skills,
        )

    # ------------------------------------------------------------ helpers

    def _default_cwd(self) -> Path:
        cfg = self.config.bot.agents.acp
        if cfg.cwd:
            return Path(cfg.cwd).expanduser()
        if self.workspaces is not None:
            return self.workspaces.workspace_for(SessionKey("cli", "default", "local"))
        return Path.cwd()

    def _workspace(self, key: SessionKey, metadata: dict[str, Any]) -> Path:
        if metadata.get("workspace"):
            path = Path(str(metadata["workspace"]))
        elif self.workspaces is not None:
            path = self.workspaces.workspace_for(key)
        else:
            raise WorkspaceError(
                f"no workspace for session {key}: pass metadata['workspace'] or a WorkspaceManager"
            )
        path.mkdir(parents=True, exist_ok=True)
        return path
