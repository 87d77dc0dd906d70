"""The config model: every key, its default and its limits, in one place.

The file is JSON with a top-level ``bot`` section and a ``storage`` section.
Keys may be written in snake_case or camelCase. Unknown keys are errors.
"""

from __future__ import annotations

import json
from contextlib import suppress
from datetime import time
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vikingbot.config.base import Model
from vikingbot.config.mcp import McpServerConfig, check_server_names
from vikingbot.config.media import MediaConfig, TranscriptionConfig
from vikingbot.grammar import time_of_day, to_seconds

# Durations and times of day: one grammar for config, HEARTBEAT.md and the CLI
# (vikingbot/grammar.py). A JSON number is seconds; text needs its unit.
Duration = Annotated[float, BeforeValidator(to_seconds)]


def _check_tz(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown IANA timezone {name!r} (e.g. Europe/Berlin, UTC)") from exc
    return name


def _check_hhmm(value: Any) -> str:
    found = time_of_day(value, allow_24=True) if isinstance(value, str) else None
    if found is None:
        raise ValueError(f"expected a time HH:MM (00:00-24:00), got {value!r}")
    return f"{found[0]:02d}:{found[1]:02d}"


TimeZoneName = Annotated[str | None, BeforeValidator(_check_tz)]
HHMM = Annotated[str, BeforeValidator(_check_hhmm)]


class ActiveHours(Model):
    start: HHMM = "08:00"
    end: HHMM = "22:00"
    timezone: TimeZoneName = None

    @model_validator(mode="after")
    def _both_ends(self) -> ActiveHours:
        """Only ``start`` or only ``end`` is refused: a silent default for the other end
        would run the heartbeat at hours the user never chose."""
        given = {"start", "end"} & self.model_fields_set
        if len(given) == 1:
            (missing,) = {"start", "end"} - given
            raise ValueError(f"{missing} is missing: active_hours needs both start and end (HH:MM)")
        return self

    def parsed(self) -> tuple[time, time]:
        def t(s: str) -> time:
            h, m = (int(x) for x in s.split(":"))
            return time(0, 0) if h == 24 else time(h, m)

        return t(self.start), t(self.end)


class Budget(Model):
    daily_tokens: int | None = Field(default=None, ge=1)
    daily_cost_usd: float | None = Field(default=None, gt=0)


class CheckerConfig(BaseModel):
    """One named checker (``bot.heartbeat.checkers.<name>``).

    ``kind`` picks the implementation from the checker registry; the other keys
    are the kind's own options, validated by the checker itself.
    """

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    kind: str
    fail: Literal["open", "closed"] = "open"
    timeout_s: float = Field(default=30, gt=0)
    moves_signature: list[str] | None = None


_BUILTIN_CHECKERS = frozenset({"command", "file", "http", "github", "gitlab"})


def _guess(name: str, known: list[str]) -> str:
    """``"; did you mean github?"`` for a near miss, else ``""``."""
    from vikingbot.grammar import closest

    found = closest(name, known, 0.6)
    return f"; did you mean {found}?" if found else ""


def default_safe_tools() -> list[str]:
    """``bot.heartbeat.safe_tools`` when unset: every tool vikingbot itself registers
    whose class says ``read_only = True`` (``tools.base.Tool.read_only``), then ``message``.

    Only vikingbot's own registrations count: a tool an MCP server or a plug-in
    describes as read-only is never safe by default; the user names it in
    ``safe_tools`` to let unattended turns use it (docs/agent.md).
    """
    return [*_own_read_only_tools(), "message"]


@cache
def _own_read_only_tools() -> tuple[str, ...]:
    from vikingbot import registry

    return tuple(
        name
        for name in registry.own("tools")
        if getattr(registry.load("tools", name), "read_only", False) is True
    )


class HeartbeatConfig(Model):
    enabled: bool = True
    interval_seconds: int = Field(default=600, ge=10)
    mode: Literal["checklist", "per-task"] = "checklist"
    target: str = "owner"
    stale_after: Duration = Field(default=2 * 86400, gt=0)
    # a result already delivered to the same place within this long is not sent again
    # (compared as delivery/news.news_form); 0 turns that off
    repeat_window: Duration = Field(default=86400, ge=0)
    # a daily:/cron: slot found more than this late (the laptop slept, the gateway was
    # down) is not run late: the ledger says `missed` and the entry waits for its next
    missed_grace: Duration = Field(default=3 * 3600, gt=0)
    timezone: TimeZoneName = None
    active_hours: ActiveHours | None = None
    max_concurrency: int = Field(default=4, ge=1, le=256)
    task_timeout_s: float = Field(default=1800, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_continuations: int = Field(default=3, ge=1)
    on_complete: Literal["move", "delete"] = "move"
    ack_max_chars: int = Field(default=300, ge=0)
    max_file_bytes: int = Field(default=256 * 1024, ge=1024)
    # every file looked at this often, with file events too (docs/heartbeat.md)
    safety_pass_s: float = Field(default=3600, ge=10)
    session_max_prompts: int = Field(default=40, ge=1)
    session_context_ratio: float = Field(default=0.7, gt=0, le=1)
    safe_tools: list[str] = Field(default_factory=default_safe_tools)
    # what a heartbeat turn's model is sent besides the prompt (docs/heartbeat.md)
    context: Literal["full", "light"] = "light"
    # which MCP servers a heartbeat turn connects at all (None: every enabled one)
    mcp_servers: list[str] | None = None
    # heartbeat turns only: a section of bot.providers (or a kind) and a model; unset,
    # bot.agents.provider / bot.agents.model (an entry's model: wins over both)
    provider: str | None = None
    model: str | None = None
    budget: Budget = Field(default_factory=Budget)
    checkers: dict[str, CheckerConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_checker_kinds(self) -> HeartbeatConfig:
        """An unknown checker kind is refused when the config is set or loaded, not at the
        first check hours later (the registry is read only for a kind vikingbot lacks)."""
        for name, checker in self.checkers.items():
            kind = checker.kind
            if kind in _BUILTIN_CHECKERS:
                continue
            from vikingbot import registry

            known = registry.names("checkers")
            if known and kind not in known:
                raise ValueError(
                    f"checkers.{name}.kind: unknown checker kind {kind!r}; "
                    f"valid kinds: {', '.join(known)}{_guess(kind, known)}"
                )
        return self


class SandboxConfig(Model):
    mode: Literal["shared", "per-channel", "per-session"] = "shared"


class AcpConfig(Model):
    """``bot.agents.acp``: the agent program the ``acp`` loop talks to (docs/agents.md).

    ``env`` values may use ``${VAR}`` (from the environment or ``.env``); ``cwd``
    defaults to the turn's workspace; ``timeout_s`` bounds one turn of the agent
    (``bot.agents.turn_timeout_s`` when unset); ``startup_timeout_s`` bounds the
    start of the process up to its answer to ``initialize``.
    """

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    startup_timeout_s: float = Field(default=60, gt=0)
    max_update_chars: int = Field(default=1_000_000, ge=1000)  # streamed text kept per turn


_BUILTIN_LOOPS = frozenset({"builtin", "acp"})
_BUILTIN_KINDS = frozenset({"openai", "anthropic", "command"})


def _check_loop(name: str) -> str:
    if name in _BUILTIN_LOOPS:  # no entry-point scan for the common case (CLI start-up)
        return name
    from vikingbot import registry

    known = registry.names("loops")
    if known and name not in known:
        raise ValueError(
            f"unknown agent loop {name!r}; valid loops: {', '.join(known)}{_guess(name, known)}"
        )
    return name


class FallbackModel(Model):
    """One model to answer with when the ones before it are down (``bot.agents.fallback_models``)."""

    provider: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)


class AgentsConfig(Model):
    loop: str = "builtin"
    provider: str | None = None
    model: str | None = None
    max_tool_iterations: int = Field(default=50, ge=1)
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    context_window: int = Field(default=128_000, ge=1024)
    history_window: int = Field(default=120, ge=0)  # messages sent verbatim; older are folded
    compact_at: float = Field(default=0.6, gt=0.05, le=0.95)  # budget: share of context_window
    compact_keep: float = Field(default=0.3, gt=0.0, le=0.8)  # of the budget, kept verbatim
    compact_model: str | None = None  # the model that writes summaries (default: model)
    turn_timeout_s: float = Field(default=600, ge=0)  # 0: no bound (not advised)
    max_reply_chars: int = Field(default=100_000, ge=1000)
    max_subagents: int = Field(default=4, ge=0)  # running at once per parent chat (spawn)
    subagent_timeout_s: float = Field(default=300, gt=0)  # each sub-agent's own turn
    acp: AcpConfig = Field(default_factory=AcpConfig)
    # tried in order when the turn's model has an outage (docs/fallbacks.md)
    fallback_models: list[FallbackModel] = Field(default_factory=list, max_length=20)
    fallback_probe_s: Duration = Field(default=60, ge=0)  # a failed model is passed over this long
    # does the model see images? auto: from media/vision.py's list (docs/media.md)
    vision: Literal["auto", "on", "off"] = "auto"

    @field_validator("loop")
    @classmethod
    def _loop(cls, v: str) -> str:
        return _check_loop(v)


class ModelPrice(Model):
    """What one model costs, USD per million tokens (``bot.providers.<name>.prices``)."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)


class ProviderConfig(Model):
    """One provider's settings (``bot.providers.<name>``).

    ``kind`` defaults to the section name, so ``bot.providers.openai`` is the
    ``openai`` kind; name a section freely (``"ollama": {"kind": "openai"}``).
    """

    kind: str | None = None
    api_key: SecretStr | None = None
    api_base: str | None = None
    timeout_s: float = Field(default=60, gt=0)
    max_retries: int = Field(default=3, ge=0)
    command: list[str] | None = None
    max_output_bytes: int = Field(default=1_000_000, ge=1024)  # command kind: reply cap
    price_input_per_mtok: float = Field(default=0.0, ge=0)
    price_output_per_mtok: float = Field(default=0.0, ge=0)
    # per model, USD per million tokens: {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    prices: dict[str, ModelPrice] = Field(default_factory=dict)


class ExecToolConfig(Model):
    timeout_s: float = Field(default=60, gt=0)
    max_output_chars: int = Field(default=10_000, ge=100)
    deny_patterns: list[str] = Field(default_factory=list)
    restrict_to_workspace: bool = True
    # bubblewrap sandbox (docs/agent.md): unattended turns only, every exec, or never
    sandbox: Literal["unattended", "always", "off"] = "unattended"
    sandbox_network: bool = False  # the sandboxed command may use the network
    # the sandboxed command's environment starts empty: these are added (docs/agent.md)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or "=" in name or "\0" in name or "\0" in value[name]:
                raise ValueError(f"bot.tools.exec.env: {name!r} is not a usable variable name")
        return value


class WebFetchConfig(Model):
    max_bytes: int = Field(default=1_000_000, ge=1024)
    timeout_s: float = Field(default=20, gt=0)
    allow_private: bool = False


class WebSearchConfig(Model):
    """``bot.tools.web_search`` (docs/agent.md): which backend answers, and its key or URL."""

    provider: Literal["duckduckgo", "brave", "tavily", "searxng"] = "duckduckgo"
    api_key: str | None = None  # brave / tavily; else BRAVE_API_KEY / TAVILY_API_KEY
    base_url: str | None = None  # searxng: the instance (required); brave/tavily: a proxy
    max_results: int = Field(default=5, ge=1, le=10)  # when the agent names no count
    timeout_s: float = Field(default=10, gt=0)
    notify_after: int = Field(default=3, ge=1)  # failures in a row before the owner is told


class ToolsConfig(Model):
    auto_approve: list[str] = Field(default_factory=list)
    auto_deny: list[str] = Field(default_factory=list)
    exec: ExecToolConfig = Field(default_factory=ExecToolConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    # MCP servers whose tools the agent gets as mcp_<server>_<tool> (docs/mcp.md)
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    mcp_idle_s: Duration = Field(default=600, gt=0)  # a server unused this long is stopped

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        check_server_names(list(v))
        return v


class ChannelBase(Model):
    enabled: bool = False
    allow_from: list[str] = Field(default_factory=list)
    owner_chat: str | None = None
    # steering from the chat (docs/chat-commands.md): a tool that needs approval is asked
    # in the chat (no answer within approval_timeout_s denies); a stranger may pair
    ask_approvals: bool = True
    approval_timeout_s: float = Field(default=300, gt=0, le=86_400)
    pairing: bool = False
    typing: bool = True
    stream_replies: bool = False  # show the reply while it is written (edited in place)


# The channels vikingbot brings: each one's section is there even when the file omits
# it (cli on, the others off), as the file ``vikingbot onboard`` writes has them. What a
# section holds is the channel's own ``settings`` model, found through the registry
# exactly as a plug-in's is (config sits below channels and never imports them).
BUILTIN_CHANNELS: dict[str, dict[str, Any]] = {
    "cli": {"enabled": True},
    "webhook": {},
    "slack": {},
    "telegram": {},
}


class ChannelsConfig(Model):
    """``bot.channels``: ``send_retries`` and one section per channel.

    Every other key names a channel (entry-point group ``vikingbot.channels``; the
    built-ins are registered there as plug-ins are); its section is validated by that
    channel class's own ``settings`` model, so a channel brings its settings with it
    and this file does not change.
    """

    model_config = ConfigDict(
        extra="allow", alias_generator=to_camel, populate_by_name=True, validate_assignment=True
    )

    send_retries: int = Field(default=3, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _builtin_sections(cls, data: Any) -> Any:
        """The built-in sections first, in their fixed order (the owner's chat is the
        first enabled channel's), a missing one at its default; then the rest as written."""
        if not isinstance(data, dict):
            return data
        ordered: dict[str, Any] = {
            name: data.get(name, dict(default)) for name, default in BUILTIN_CHANNELS.items()
        }
        ordered.update((k, v) for k, v in data.items() if k not in BUILTIN_CHANNELS)
        return ordered

    @model_validator(mode="after")
    def _channel_sections(self) -> ChannelsConfig:
        extra = self.model_extra or {}
        for name, raw in list(extra.items()):
            extra[name] = _channel_section(name, raw)
        return self

    def sections(self) -> dict[str, ChannelBase]:
        """Every channel section by name: the built-ins, then the others in config order."""
        return {
            name: section
            for name, section in (self.model_extra or {}).items()
            if isinstance(section, ChannelBase)
        }


def _channel_section(name: str, raw: Any) -> ChannelBase:
    """A channel's section, validated by the channel class's ``settings`` model."""
    from pydantic import ValidationError

    from vikingbot import registry
    from vikingbot.errors import NotConfiguredError

    if isinstance(raw, ChannelBase):
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"{name}: expected a section (an object), got {raw!r}")
    try:
        cls = registry.load("channels", name)
    except NotConfiguredError as exc:
        raise ValueError(str(exc)) from None
    settings = getattr(cls, "settings", ChannelBase)
    if not (isinstance(settings, type) and issubclass(settings, ChannelBase)):
        raise ValueError(f"{name}: the channel's settings is not a ChannelBase model")
    try:
        return settings.model_validate(_env_json(settings, raw))
    except ValidationError as exc:
        problems = "; ".join(
            f"{name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(problems) from None


def _field_of(settings: type[ChannelBase], key: str) -> str | None:
    """The field a camelCase key names, or None."""
    return next((f for f in settings.model_fields if to_camel(f) == key), None)


def _env_json(settings: type[ChannelBase], raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with a JSON text decoded where the key takes a list or an object and no
    text: how ``VIKINGBOT_BOT__CHANNELS__WEBHOOK__OUTBOUND_URLS='["https://..."]'``
    arrives (the environment reader decodes JSON only for keys this file declares)."""
    by_key = {**settings.model_fields, **{to_camel(k): f for k, f in settings.model_fields.items()}}
    # each field once: the file may spell a key in camelCase (allowFrom) while the
    # environment can only spell it snake_case (..._ALLOW_FROM); the environment wins
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key if key in settings.model_fields else _field_of(settings, key)
        if name is not None and name != key and name in raw:
            continue  # the snake_case spelling (the environment's) is kept
        out[key] = value
    raw = dict(out)
    for key, value in raw.items():
        field = by_key.get(key)
        if field is None or not isinstance(value, str) or value[:1] not in ("[", "{"):
            continue
        ann = field.annotation
        kinds = get_args(ann) if isinstance(ann, UnionType) or get_origin(ann) is Union else (ann,)
        if str in kinds or not any(get_origin(k) in (list, dict) for k in kinds):
            continue
        with suppress(ValueError):  # else left as written: the model's error names the key
            out[key] = json.loads(value)
    return out


class GatewayConfig(Model):
    host: str = "127.0.0.1"
    port: int = Field(default=18790, ge=1, le=65535)
    token: SecretStr | None = None
    # Host names (besides IP addresses, localhost and this machine's name) that mean this
    # gateway, e.g. a reverse proxy's public name; any other Host header is refused.
    allowed_hosts: list[str] = Field(default_factory=list)
    # a request's head must arrive within head_timeout_s, its body within body_timeout_s
    head_timeout_s: float = Field(default=10, gt=0, le=3600)
    body_timeout_s: float = Field(default=30, gt=0, le=3600)
    shutdown_grace_s: float = Field(default=1, ge=0)
    # Several gateways on one PostgreSQL database (docs/scaling.md): how long a claim
    # on a heartbeat unit or a chat channel lasts without renewal (renewed every third
    # of it), so a dead gateway's work moves on after about this long; a gateway
    # silent for twice this long counts as dead.
    lease_s: float = Field(default=15, ge=1, le=3600)


class MemoryConfig(Model):
    history_max_days: int = Field(default=30, ge=1)
    index_interval_s: float = Field(default=900, ge=10)
    consolidate_after_idle: Duration = Field(default=6 * 3600, gt=0)
    max_chars: int = Field(default=8000, ge=500)  # per memory file (MEMORY.md, USER.md)
    model: str | None = None  # the memory pass's model (default: compact_model, then model)


class TelemetryConfig(Model):
    """OpenTelemetry traces over OTLP/HTTP (docs/telemetry.md); off without an endpoint."""

    otlp_endpoint: str | None = None  # e.g. http://127.0.0.1:4318
    content: bool = False  # message text in model-call spans
    service_name: str = Field(default="vikingbot", min_length=1, max_length=200)


class BotConfig(Model):
    owner: str | None = None
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)

    @model_validator(mode="after")
    def _provider_named(self) -> BotConfig:
        self._check_provider("bot.agents.provider", self.agents.provider)
        self._check_provider("bot.heartbeat.provider", self.heartbeat.provider)
        for i, fb in enumerate(self.agents.fallback_models):
            self._check_provider(f"bot.agents.fallback_models[{i}].provider", fb.provider)
        return self

    def _check_provider(self, where_set: str, name: str | None) -> None:
        """A provider name is a section of bot.providers or a provider kind; else refused,
        with the nearest of either."""
        if not name:
            return
        section = self.providers.get(name)
        kind = (section.kind if section is not None else None) or name
        if kind in _BUILTIN_KINDS:
            return
        from vikingbot import registry

        kinds = registry.names("providers")
        if kinds and kind not in kinds:
            sections = ", ".join(sorted(self.providers)) or "none"
            where = (
                f"bot.providers.{name}.kind is {kind!r}"
                if section is not None
                else f"{where_set} {name!r} is neither a section of bot.providers "
                f"(configured: {sections}) nor a provider kind"
            )
            near = kinds if section is not None else [*kinds, *self.providers]
            guess = _guess(kind, near)
            raise ValueError(f"{where}; valid provider kinds: {', '.join(kinds)}{guess}")


class StorageConfig(Model):
    workspace: Path | None = None  # data directory; None means <home>/data
    database_url: str | None = None  # None means sqlite:///<data>/state.db

    @field_validator("database_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("sqlite://", "postgresql://", "postgresql+")):
            raise ValueError("expected a sqlite:// or postgresql:// URL")
        return v


class Config(Model):
    bot: BotConfig = Field(default_factory=BotConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
