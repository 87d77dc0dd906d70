"""The built-in agent loop: prompt -> model -> tools -> model ... -> reply.

``BuiltinLoop`` builds the context (``context``), calls the provider with the
registered tools the turn may use (all of them with someone present; with nobody
present only those approval would let run, ``approval.runs_unattended``), runs
the tool calls the approval policy allows (``approval``), and repeats up to
``bot.agents.max_tool_iterations`` times; then one last call with tools switched off ends the turn as ``turn-limit``. A
tool failure goes back to the model as text. A provider failure ends the turn
as ``error`` (nothing raised), except ``NotConfiguredError``, which is raised.

The turn lock, the timeout and what is written to history (the heartbeat no-op
rule, a failed turn keeping its prompt) are ``agent.history``'s, shared with
every other loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.agent.approval import (
    Action,
    Approver,
    mcp_action,
    runs_unattended,
    shown_name,
    tool_action,
)
from vikingbot.agent.context import history_messages, read_context_files, system_prompt, to_session
from vikingbot.agent.history import TurnLog, run_locked, to_key
from vikingbot.agent.streaming import TURN_STREAM, StreamingProvider
from vikingbot.agent.types import AgentLoop, Readiness, ToolCallRecord, TurnResult
from vikingbot.errors import (
    NotConfiguredError,
    ProviderUnavailable,
    ToolError,
    VikingbotError,
    WorkspaceError,
)
from vikingbot.mcp.tool import McpTool
from vikingbot.providers.base import INVALID_ARGUMENTS, ChatMessage, ChatRequest, ToolCall
from vikingbot.providers.factory import create_provider
from vikingbot.session.types import SessionKey
from vikingbot.skills.discover import catalog
from vikingbot.skills.prompt import listing
from vikingbot.tools.base import Deliver, Tool, ToolContext, is_unattended
from vikingbot.tools.registry import load_tools

if TYPE_CHECKING:
    from vikingbot.config.schema import Config
    from vikingbot.providers.base import Provider, ProviderResponse
    from vikingbot.session.store import SessionStore

MAX_RESULT_CHARS = 100_000
LIMIT_NOTE = (
    "You have reached the tool-call limit for this turn ({n} rounds). Do not call any more "
    "tools: answer now with what you have, and say what is left undone."
)


class BuiltinLoop(AgentLoop):
    """The agent loop vikingbot ships (registered as ``builtin`` in ``vikingbot.loops``)."""

    name = "builtin"

    def __init__(
        self,
        config: Config,
        *,
        sessions: SessionStore,
        provider: Provider | None = None,
        tools: dict[str, Tool] | None = None,
        **parts: Any,
    ) -> None:
        super().__init__(config, sessions=sessions, **parts)
        self._provider = provider
        self._tools = tools
        self._retired: list[Provider] = []
        self._others: dict[str, Provider] = {}  # providers a turn names (metadata "provider")
        self._injected = provider is not None  # a given provider is kept across reconfigure
        self._provider_lock = asyncio.Lock()

    # ------------------------------------------------------------- plumbing

    @property
    def provider(self) -> Provider:
        """The provider, created from config on first use (``NotConfiguredError`` if none)."""
        if self._provider is None:
            self._provider = create_provider(self.config, environ=self.environ)
        return self._provider

    async def ensure_provider(self) -> Provider:
        """The provider, created in a worker thread on first use.

        Importing a model SDK takes long enough (seconds on a cold disk) to stall
        every other coroutine if done on the event loop; turns that start together
        wait for the one creation.
        """
        if self._provider is None:
            async with self._provider_lock:
                if self._provider is None:

                    def build() -> Provider:
                        provider = create_provider(self.config, environ=self.environ)
                        provider.warm_up()
                        return provider

                    self._provider = await asyncio.to_thread(build)
        return self._provider

    async def _provider_for(self, meta: dict[str, Any]) -> Provider:
        """The provider the turn's metadata names (``bot.heartbeat.provider`` for a heartbeat
        turn; built once, in a worker thread), else the loop's own."""
        name = str(meta.get("provider") or "") or None
        if name is None or name == self.config.bot.agents.provider or self._injected:
            return await self.ensure_provider()
        if name not in self._others:
            async with self._provider_lock:
                if name not in self._others:

                    def build() -> Provider:
                        provider = create_provider(self.config, environ=self.environ, name=name)
                        provider.warm_up()
                        return provider

                    self._others[name] = await asyncio.to_thread(build)
        return self._others[name]

    @property
    def tools(self) -> dict[str, Tool]:
        if self._tools is None:
            self._tools = load_tools()
        return self._tools

    def _model(self, provider: Provider, meta: dict[str, Any]) -> str:
        """The model the turn's metadata names (a heartbeat turn's), else ``bot.agents.model``."""
        model = str(meta.get("model") or "") or self.config.bot.agents.model
        if not model and provider.needs_model:
            raise NotConfiguredError(
                "no model configured: set bot.agents.model, e.g. "
                "vikingbot config set bot.agents.model gpt-4o-mini"
            )
        return model or ""

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

    def readiness(self) -> Readiness:
        """Ready when the configured provider has what it needs (SDK, key or base URL, model)."""
        agents = self.config.bot.agents
        try:
            provider = self._provider or create_provider(self.config, environ=self.environ)
        except NotConfiguredError as exc:
            return Readiness.missing(str(exc))
        detail = f"{agents.provider or provider.name} / {agents.model or '(no model)'}"
        problem = provider.problem(agents.model)
        return Readiness.missing(problem, detail) if problem else Readiness.ok(detail)

    async def start(self) -> None:
        if self.readiness().ready:
            await self.ensure_provider()

    def reconfigure(self, config: Config) -> None:
        """Use a reloaded config from the next turn on (a changed provider is rebuilt)."""
        old = self.config
        self.config = config
        agents_changed = (old.bot.agents.provider, old.bot.agents.model) != (
            config.bot.agents.provider,
            config.bot.agents.model,
        )
        if agents_changed or old.bot.providers != config.bot.providers:
            self._rebuild_providers()

    def environ_changed(self) -> None:
        """Providers are built again (a key in ``.env`` is read when one is built)."""
        self._rebuild_providers()

    def _rebuild_providers(self) -> None:
        """The next turn builds its provider anew (an injected one is kept); the old
        ones close with the loop."""
        if self._provider is not None and not self._injected:
            self._retired.append(self._provider)
            self._provider = None
        self._retired.extend(self._others.values())
        self._others.clear()

    async def aclose(self) -> None:
        for p in [*self._retired, *self._others.values(), self._provider]:
            if p is not None:
                await p.aclose()
        self._retired.clear()
        self._others.clear()
        self._provider = None

    # ----------------------------------------------------------------- turn

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
        while self._retired:
            await self._retired.pop().aclose()
        provider = await self._provider_for(meta)
        model = self._model(provider, meta)
        workspace = self._workspace(key, meta)

        async def body(turn: TurnLog) -> None:
            tools = await self.turn_tools(meta)
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
            )
            try:
                await self._run(turn, ctx, provider, model, prompt, tools)
            finally:
                turn.result.messages_sent = ctx.messages_sent

        return await run_locked(self.config, self.sessions, self.clock, key, meta, body)

    async def turn_tools(self, metadata: dict[str, Any]) -> dict[str, Tool]:
        """The tools one turn may call: the registered ones, then the MCP servers' (an
        unattended turn connects only the servers ``bot.heartbeat.mcp_servers`` allows)."""
        if self.mcp is None:
            return self.tools
        tools = dict(self.tools)
        found = await self.mcp.tools_for(unattended=is_unattended(metadata))
        for name, tool in found.items():
            tools.setdefault(name, tool)
        return tools

    async def _run(
        self,
        turn: TurnLog,
        ctx: ToolContext,
        provider: Provider,
        model: str,
        prompt: str,
        tools: dict[str, Tool],
    ) -> None:
        agents = self.config.bot.agents
        now = self.clock.now()
        # a heartbeat turn in light context: preamble and prompt (the checklist) only
        light = (
            bool(turn.metadata.get("heartbeat")) and self.config.bot.heartbeat.context == "light"
        )
        files = [] if light else read_context_files(ctx.workspace)
        unattended = is_unattended(turn.metadata)
        schemas = [  # nobody present: only what approval would let run (one predicate)
            t.schema()
            for t in tools.values()
            if not unattended or runs_unattended(self.config, action_of(t))
        ]
        skills = None
        if not light and any(s.name == "skill" for s in schemas):  # only where loadable
            found = await ctx.io.run(catalog, workspace=ctx.workspace, user=self.user_skills)
            skills = listing(found)
        system = system_prompt(
            ctx.workspace,
            files,
            now=now,
            timezone=self.config.bot.heartbeat.timezone,
            session_key=turn.key,
            metadata=turn.metadata,
            skills=skills,
            light=light,
        )
        history = (
            self.sessions.read_messages(turn.key, limit=agents.history_window)
            if agents.history_window and not light
            else []
        )
        user = ChatMessage("user", prompt)
        messages = [ChatMessage("system", system), *history_messages(history), user]
        turn.writes.append(to_session(user, now, metadata=turn.message_meta()))
        request = ChatRequest(
            model=model,
            messages=messages,
            tools=schemas,
            max_tokens=agents.max_tokens,
            temperature=agents.temperature,
        )
        for _ in range(agents.max_tool_iterations):
            resp = await self._complete(turn, provider, request)
            if resp is None:
                return
            if not resp.tool_calls:
                self._reply(turn, resp.text, resp)
                return
            assistant = ChatMessage("assistant", resp.text, tool_calls=list(resp.tool_calls))
            results = [await self._tool(turn, ctx, call, tools) for call in resp.tool_calls]
            request.messages += [assistant, *results]
            usage = {"input": resp.tokens_in, "output": resp.tokens_out}
            when = self.clock.now()
            meta = turn.message_meta()
            turn.writes.append(to_session(assistant, when, usage=usage, metadata=meta))
            turn.writes.extend(to_session(r, when, metadata=meta) for r in results)
        note = ChatMessage("user", LIMIT_NOTE.format(n=agents.max_tool_iterations))
        last = ChatRequest(
            model=model,
            messages=[*request.messages, note],
            tools=schemas,
            tool_choice="none",
            max_tokens=agents.max_tokens,
            temperature=agents.temperature,
        )
        resp = await self._complete(turn, provider, last)
        if resp is not None:
            turn.result.ended = "turn-limit"
            self._reply(turn, resp.text, resp)
            turn.log.warning("turn {} hit the tool-call limit", turn.turn_id)

    async def _complete(
        self, turn: TurnLog, provider: Provider, request: ChatRequest
    ) -> ProviderResponse | None:
        result = turn.result
        result.model_calls += 1
        sink = TURN_STREAM.get()  # a chat showing live replies (agent/streaming.py)
        try:
            if sink is not None and isinstance(provider, StreamingProvider):
                sink.begin()
                resp = await provider.stream(request, sink.delta)
            else:
                resp = await provider.complete(request)
        except NotConfiguredError:
            raise
        except VikingbotError as exc:
            result.ended = "error"
            result.error = str(exc)
            result.text = None
            result.provider_down = isinstance(exc, ProviderUnavailable)
            turn.log.error("turn {}: {}", turn.turn_id, exc)
            return None
        result.tokens_in += resp.tokens_in
        result.tokens_out += resp.tokens_out
        result.cost_usd += provider.cost(resp.tokens_in, resp.tokens_out, model=request.model)
        return resp

    def _reply(self, turn: TurnLog, text: str, resp: ProviderResponse) -> None:
        turn.reply(text, usage={"input": resp.tokens_in, "output": resp.tokens_out})

    async def _tool(
        self, turn: TurnLog, ctx: ToolContext, call: ToolCall, tools: dict[str, Tool]
    ) -> ChatMessage:
        sink = TURN_STREAM.get()
        if sink is not None:
            sink.tool(shown_name(call.name, 60))
        text = await self._tool_text(turn, ctx, call, tools)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "\n[... result truncated]"
        return ChatMessage("tool", text, tool_call_id=call.id, name=call.name)

    async def _tool_text(
        self, turn: TurnLog, ctx: ToolContext, call: ToolCall, tools: dict[str, Tool]
    ) -> str:
        _, name, args = call
        result = turn.result
        tool = tools.get(name)

        def record(text: str, *, approved: bool, error: bool) -> str:
            rec = ToolCallRecord(
                name=name,
                arguments=args,
                result=text,
                read_only=bool(tool.read_only) if tool else False,
                approved=approved,
                error=error,
            )
            result.tool_calls.append(rec)
            if self.on_tool_call is not None:
                self.on_tool_call(rec)
            return text

        approver = Approver(self.config, store=self.store, callback=self.approval_callback)
        refusal, checked = _precheck(tools, tool, name, args)
        if refusal is not None or tool is None:
            refusal = refusal or f"there is no tool {name[:100]!a}"
            approver.refuse(
                name,
                args,
                refusal,
                session=str(turn.key),
                metadata=turn.metadata,
                turn_id=turn.turn_id,
            )
            return record(f"Error: {refusal}", approved=False, error=True)
        decision = await approver.check(
            action_of(tool),
            checked,
            session=str(turn.key),
            metadata=turn.metadata,
            turn_id=turn.turn_id,
        )
        if isinstance(tool, McpTool) and decision.approved and decision.entry is not None:
            tool.pin()  # a list approved this server: as it is configured now
        if not decision.approved:
            return record(
                f"Tool call refused: {decision.reason}. Do not retry it; carry on without it "
                "or tell the user what you need.",
                approved=False,
                error=False,
            )
        sent_before = ctx.messages_sent
        try:
            text = await tool.run(checked, ctx)
        except ToolError as exc:
            return record(f"Error: {exc}", approved=True, error=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool plugin's bug must not end the turn
            turn.log.exception("tool {} crashed", name)
            return record(
                f"Error: {name} failed: {type(exc).__name__}: {exc}", approved=True, error=True
            )
        if not tool.read_only or ctx.messages_sent > sent_before:
            result.wrote = True
        return record(str(text), approved=True, error=False)


def action_of(tool: Tool) -> Action:
    """What a call of ``tool`` is, for the approval rule."""
    if isinstance(tool, McpTool):
        what = tool.action()
        return mcp_action(what.server, what.tool, identity=what.identity, pinned=what.pinned)
    return tool_action(tool.name, read_only=bool(tool.read_only))


def _precheck(
    tools: Any, tool: Tool | None, name: str, args: dict[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    """Why a call is refused before the approval policy is asked (the caller audits it),
    else ``None`` and the checked arguments."""
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return f"there is no tool {name[:100]!a} (tools: {known})", args
    if INVALID_ARGUMENTS in args:
        return f"the arguments for {name} were not valid JSON; send a JSON object", args
    try:
        return None, tool.check_args(args)
    except ToolError as exc:
        return str(exc), args
