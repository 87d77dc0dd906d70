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
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot import telemetry
from vikingbot.agent import compact
from vikingbot.agent.approval import (
    Action,
    Approver,
    mcp_action,
    runs_unattended,
    shown_name,
    tool_action,
)
from vikingbot.agent.compactor import Compactor, TurnContext, compact_session
from vikingbot.agent.context import read_context_files, system_prompt, to_session
from vikingbot.agent.history import TurnLog, run_locked, take_images, to_key
from vikingbot.agent.streaming import TURN_STREAM, StreamingProvider
from vikingbot.agent.subagents import Subagents, TurnSpawner
from vikingbot.agent.types import AgentLoop, Readiness, ToolCallRecord, TurnResult
from vikingbot.errors import (
    ContextTooLongError,
    NotConfiguredError,
    ToolError,
    VikingbotError,
    WorkspaceError,
)
from vikingbot.mcp.tool import McpTool
from vikingbot.providers.base import (
    INVALID_ARGUMENTS,
    ChatMessage,
    ChatRequest,
    ImagePart,
    ToolCall,
)
from vikingbot.providers.factory import create_provider
from vikingbot.providers.fallback import Link, Outages, chain, is_outage
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
MEMORY_PREFIX = "memory/"  # context files that are the agent's memory (a part of their own)
LONG_RETRIES = 2  # "too long" answers met by compacting again within one model call
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
        self._subagents = Subagents(
            self._run_child, self.clock, lambda key: self.sessions.path_for(key).exists()
        )
        # models that failed with an outage, shared by every turn (providers/fallback.py)
        self.outages = Outages(lambda: self.config.bot.agents.fallback_probe_s)
        self.outages.on_event = lambda event: self.on_outage(event) if self.on_outage else None

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
    def compactor(self) -> Compactor:
        """Keeps requests within budget (``agent.compact``); built with the current config."""
        return Compactor(self.config, self.sessions, self.clock)

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

    def subagents(self) -> list[dict[str, Any]]:
        return [c.summary() for c in self._subagents.running()]

    def cancel_subagents(self, session: SessionKey | str, only: str | None = None) -> int:
        return self._subagents.cancel(session, only)

    async def _run_child(
        self, prompt: str, key: SessionKey, meta: dict[str, Any], deliver: Deliver | None
    ) -> TurnResult:
        return await self.run_turn(prompt, key, meta, deliver=deliver)

    def models_down(self) -> list[dict[str, str]]:
        return self.outages.status()

    async def aclose(self) -> None:
        await self._subagents.aclose()
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
        images = take_images(meta)
        while self._retired:
            await self._retired.pop().aclose()
        provider = await self._provider_for(meta)
        model = self._model(provider, meta)
        workspace = self._workspace(key, meta)
        agents = self.config.bot.agents
        name = str(meta.get("provider") or "") or agents.provider or provider.name
        links = chain(
            Link(name, model), (Link(f.provider, f.model) for f in agents.fallback_models)
        )

        spawners: list[TurnSpawner] = []

        async def body(turn: TurnLog) -> None:
            tools = narrowed(await self.turn_tools(meta), meta)
            spawner = None
            if not meta.get("subagent"):  # a sub-agent starts none of its own
                offered = {n for n, t in tools.items() if self._offered(t, meta)}
                spawner = self._subagents.for_turn(
                    self.config,
                    key,
                    meta,
                    workspace=str(workspace),
                    allowed=offered,
                    deliver=deliver,
                    result=turn.result,
                )
                spawners.append(spawner)
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
                spawner=spawner,
            )
            try:
                await self._run(
                    turn, ctx, _Models(self, provider, links), model, prompt, tools, images
                )
                if spawner is not None:
                    await spawner.finish()
            except BaseException:  # cancelled or timed out: its sub-agents stop too
                if spawner is not None:
                    spawner.cancel()
                raise
            finally:
                turn.result.messages_sent = ctx.messages_sent

        attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "vikingbot",
            "gen_ai.conversation.id": str(key),
            "gen_ai.request.model": model,
            "vikingbot.turn.kind": _kind(meta),
        }
        try:
            with telemetry.span("invoke_agent vikingbot", attrs) as sp:
                result = await run_locked(self.config, self.sessions, self.clock, key, meta, body)
                sp.set("vikingbot.turn.ended", result.ended)
                sp.set("vikingbot.model", result.model)
                sp.set("gen_ai.usage.input_tokens", result.tokens_in)
                sp.set("gen_ai.usage.output_tokens", result.tokens_out)
                if result.error:
                    sp.fail(result.error)
                return result
        finally:  # a chat's sub-agents report after the turn (its reply goes first)
            for spawner in spawners:
                spawner.release()

    async def compact(self, session_key: SessionKey | str) -> str:
        """Fold the session's older turns into its summary now (``agent.compactor``)."""
        key = to_key(session_key)
        provider = await self.ensure_provider()
        model = self._model(provider, {})
        async with self.sessions.turn_lock(key):
            return await compact_session(self.compactor, key, provider, model)

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
        models: _Models,
        model: str,
        prompt: str,
        tools: dict[str, Tool],
        images: list[ImagePart] | None = None,
    ) -> None:
        agents = self.config.bot.agents
        now = self.clock.now()
        # a heartbeat turn in light context: preamble and prompt (the checklist) only
        light = (
            bool(turn.metadata.get("heartbeat")) and self.config.bot.heartbeat.context == "light"
        )
        files = [] if light else read_context_files(ctx.workspace)
        # nobody present: only what approval would let run (one predicate)
        offered = [name for name, t in tools.items() if self._offered(t, turn.metadata)]
        schemas = [tools[name].schema() for name in offered]
        skills = None
        if not light and any(s.name == "skill" for s in schemas):  # only where loadable
            found = await ctx.io.run(catalog, workspace=ctx.workspace, user=self.user_skills)
            skills = listing(found)
        memory = [(n, t) for n, t in files if n.startswith(MEMORY_PREFIX)]
        system = system_prompt(
            ctx.workspace,
            [(n, t) for n, t in files if not n.startswith(MEMORY_PREFIX)],
            now=now,
            timezone=self.config.bot.heartbeat.timezone,
            session_key=turn.key,
            metadata=turn.metadata,
            skills=skills,
            light=light,
            offered=offered,
            known=list(tools),
        )
        if agents.history_window and not light:
            split, seen = await ctx.io.run(self.compactor.load, turn.key)
        else:
            split, seen = compact.Split(None, []), 0
        user = ChatMessage("user", prompt, images=list(images or []))
        tctx = TurnContext(
            system=system,
            memory="".join(f"\n\n## {n}\n\n{t}" for n, t in memory),
            summary=split.summary,
            recent=split.recent,
            tools=schemas,
            seen=seen,
            turn=[user],
        )
        said = {"via": turn.metadata["via"]} if turn.metadata.get("via") else {}
        turn.writes.append(to_session(user, now, metadata={**turn.message_meta(), **said}))
        await self.compactor.fit(tctx, turn.key, models.primary, model, turn.result)
        request = ChatRequest(
            model=model,
            messages=tctx.messages(),
            tools=schemas,
            max_tokens=agents.max_tokens,
            temperature=agents.temperature,
        )
        turn.result.request_chars = tctx.breakdown()

        async def call(req: ChatRequest, *tail: ChatMessage) -> ProviderResponse | None:
            return await self._fitted(turn, tctx, models, model, req, tail)

        for _ in range(agents.max_tool_iterations):
            resp = await call(request)
            if resp is None:
                return
            if not resp.tool_calls:
                self._reply(turn, resp.text, resp)
                return
            assistant = ChatMessage("assistant", resp.text, tool_calls=list(resp.tool_calls))
            results = [await self._tool(turn, ctx, call, tools) for call in resp.tool_calls]
            tctx.turn += [assistant, *results]
            request.messages = tctx.messages()
            usage = {"input": resp.tokens_in, "output": resp.tokens_out}
            when = self.clock.now()
            meta = turn.message_meta()
            turn.writes.append(to_session(assistant, when, usage=usage, metadata=meta))
            turn.writes.extend(to_session(r, when, metadata=meta) for r in results)
        note = ChatMessage("user", LIMIT_NOTE.format(n=agents.max_tool_iterations))
        last = ChatRequest(
            model=model,
            messages=[],
            tools=schemas,
            tool_choice="none",
            max_tokens=agents.max_tokens,
            temperature=agents.temperature,
        )
        resp = await call(last, note)
        if resp is not None:
            turn.result.ended = "turn-limit"
            self._reply(turn, resp.text, resp)
            turn.log.warning("turn {} hit the tool-call limit", turn.turn_id)

    def _offered(self, tool: Tool, metadata: dict[str, Any]) -> bool:
        """Whether a turn is offered ``tool``: every tool with someone present, else only
        what approval would let run."""
        return not is_unattended(metadata) or runs_unattended(self.config, action_of(tool))

    async def _fitted(
        self,
        turn: TurnLog,
        tctx: TurnContext,
        models: _Models,
        model: str,
        request: ChatRequest,
        tail: tuple[ChatMessage, ...],
    ) -> ProviderResponse | None:
        """One model call with the request kept within budget: compacted before it is
        sent when it would pass the budget, and again on a "too long" answer."""
        compactor = self.compactor
        for attempt in range(LONG_RETRIES + 1):
            if attempt or tctx.size() > compactor.budget:
                await compactor.fit(
                    tctx, turn.key, models.primary, model, turn.result, force=attempt > 0
                )
                if attempt:
                    tctx.cut_turn()  # this turn's older tool results too
            request.messages = [*tctx.messages(), *tail]
            turn.result.request_chars = tctx.breakdown()
            try:
                return await self._complete(turn, models, request, too_long=attempt < LONG_RETRIES)
            except ContextTooLongError as exc:
                turn.log.warning("turn {}: {}; compacting and trying again", turn.turn_id, exc)
        return None  # not reached: the last attempt returns (an error ends the turn)

    async def _complete(
        self, turn: TurnLog, models: _Models, request: ChatRequest, *, too_long: bool = False
    ) -> ProviderResponse | None:
        """One model call, down the chain of models while each has an outage; any other
        provider error ends the turn (``too_long``: a "too long" answer is raised for the
        caller to compact and retry)."""
        result = turn.result
        result.model_calls += 1
        tried: list[Link] = []
        for link in self.outages.order(models.links, time.monotonic()):
            try:
                provider = await models.provider(link)
                resp = await _traced_call(provider, replace(request, model=link.model), link)
            except NotConfiguredError:
                if link == models.links[0]:
                    raise
                turn.log.error("fallback {} is not usable; skipped", link.label)
                continue
            except ContextTooLongError:
                if too_long:
                    raise
                result.ended = "error"
                result.error = "the conversation is too long even after compaction"
                result.text = None
                turn.log.error("turn {}: too long after compaction", turn.turn_id)
                return None
            except VikingbotError as exc:
                if is_outage(exc):
                    self.outages.failed(link, str(exc), time.monotonic(), self.clock.now())
                    tried.append(link)
                    turn.log.warning("model {} is down: {}", link.label, exc)
                    continue
                result.ended = "error"
                result.error = str(exc)
                result.text = None
                turn.log.error("turn {}: {}", turn.turn_id, exc)
                return None
            self.outages.answered(link, tried)
            if tried:
                turn.log.warning("turn {}: {} answered instead", turn.turn_id, link.label)
            result.model = link.label
            result.tokens_in += resp.tokens_in
            result.tokens_out += resp.tokens_out
            result.cost_usd += provider.cost(resp.tokens_in, resp.tokens_out, model=link.model)
            return resp
        result.ended = "error"
        result.error = self.outages.errors.get(tried[-1]) if tried else "no model to answer with"
        result.text = None
        result.provider_down = True
        turn.log.error("turn {}: every model is down: {}", turn.turn_id, result.error)
        return None

    def _reply(self, turn: TurnLog, text: str, resp: ProviderResponse) -> None:
        turn.reply(text, usage={"input": resp.tokens_in, "output": resp.tokens_out})
        # the request's size by part, kept with the reply for `vikingbot status`
        turn.final[-1].metadata["request"] = dict(turn.result.request_chars)

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

        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name[:200],
            "gen_ai.tool.call.id": call.id,
        }
        if telemetry.enabled() and isinstance(tool, McpTool):
            attrs["vikingbot.mcp.server"] = tool.action().server
        with telemetry.span(f"execute_tool {name[:100]}", attrs) as sp:
            text = await self._tool_checked(turn, ctx, call, tool, tools, record)
            last = result.tool_calls[-1] if result.tool_calls else None
            sp.set("vikingbot.tool.approved", bool(last and last.approved))
            if last is not None and last.error:
                sp.fail(text[:500])
            return text

    async def _tool_checked(
        self,
        turn: TurnLog,
        ctx: ToolContext,
        call: ToolCall,
        tool: Tool | None,
        tools: dict[str, Tool],
        record: Any,
    ) -> str:
        _, name, args = call
        result = turn.result
        # a sub-agent runs with nobody watching it: it never asks
        ask = None if turn.metadata.get("subagent") else self.approval_callback
        approver = Approver(self.config, store=self.store, callback=ask)
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


def narrowed(tools: dict[str, Tool], metadata: dict[str, Any]) -> dict[str, Tool]:
    """A sub-agent's tools: only those its parent named (``metadata["tools"]``)."""
    if not metadata.get("subagent"):
        return tools
    allowed = set(metadata.get("tools") or ())
    return {name: tool for name, tool in tools.items() if name in allowed}


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


def _kind(meta: dict[str, Any]) -> str:
    if meta.get("heartbeat"):
        return "heartbeat"
    if meta.get("cron"):
        return "cron"
    return "background" if is_unattended(meta) else "chat"


async def _call_model(provider: Provider, request: ChatRequest) -> ProviderResponse:
    """The provider's answer: streamed into a chat that shows live replies
    (``agent/streaming.py``) when the provider can stream, else whole."""
    sink = TURN_STREAM.get()
    if sink is not None and isinstance(provider, StreamingProvider):
        sink.begin()
        return await provider.stream(request, sink.delta)
    return await provider.complete(request)


async def _traced_call(provider: Provider, request: ChatRequest, link: Link) -> ProviderResponse:
    """One model call as a GenAI ``chat`` span (content only with ``bot.telemetry.content``)."""
    if not telemetry.enabled():
        return await _call_model(provider, request)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": getattr(provider, "kind", "") or link.provider,
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.temperature": request.temperature,
        "vikingbot.provider": link.provider,
    }
    if telemetry.content():
        attrs["gen_ai.input.messages"] = telemetry.as_text(
            [{"role": m.role, "content": m.content} for m in request.messages]
        )
    with telemetry.span(f"chat {request.model}", attrs, kind="client") as sp:
        try:
            resp = await _call_model(provider, request)
        except VikingbotError as exc:
            sp.fail(exc)
            raise
        sp.set("gen_ai.response.model", request.model)
        sp.set("gen_ai.response.finish_reasons", [resp.finish_reason])
        sp.set("gen_ai.usage.input_tokens", resp.tokens_in)
        sp.set("gen_ai.usage.output_tokens", resp.tokens_out)
        if telemetry.content():
            out = {"role": "assistant", "content": resp.text}
            sp.set("gen_ai.output.messages", telemetry.as_text([out]))
        return resp


class _Models:
    """A turn's chain of models and how to get each one's provider."""

    def __init__(self, loop: BuiltinLoop, primary: Provider, links: list[Link]) -> None:
        self.loop = loop
        self.primary = primary
        self.links = links

    async def provider(self, link: Link) -> Provider:
        if link == self.links[0]:
            return self.primary
        return await self.loop._provider_for({"provider": link.provider})
