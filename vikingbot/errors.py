"""Every error vikingbot raises on purpose.

    VikingbotError                  root; `str(err)` is a message a user can act on
    ├── ConfigError                 bad or unreadable config (key path, value, expectation)
    ├── SessionError                session store problems (bad key, corrupt JSONL)
    ├── WorkspaceError              workspace resolution / template problems
    ├── StoreError                  state database problems (connect, migrate)
    │   └── LeaseLost               a claim was taken over (store/leases.py)
    ├── ProviderError               a model provider failed (converted from SDK errors)
    │   ├── ProviderAuthError       bad or missing key
    │   ├── ProviderNotFoundError   unknown model / endpoint path
    │   ├── ProviderUnavailable     an outage: connection error, timeout, 429, 5xx
    │   │   └── ProviderUnreachable connection refused, DNS, timeout
    │   └── ContextTooLongError     prompt exceeds the model window
    ├── NotConfiguredError          a needed part (provider, channel) is not configured
    ├── ToolError                   a tool refused or failed (goes back to the model as text)
    │   └── SearchFailed            a web search backend failed or refused (tools/search_backends.py)
    ├── HeartbeatError              heartbeat file / entry problems
    │   └── EntryError              one HEARTBEAT.md entry is malformed (has line number)
    ├── CheckerError                an `only-if:` checker failed or is refused
    ├── ChannelError                a chat platform failed (converted from SDK errors); retried
    │   ├── ChannelRejected         refused for good (unknown chat, no access): not retried
    │   └── ChannelBusy             slow down: retried after `retry_after` seconds
    ├── DeliveryError               a delivery target is malformed or refused
    ├── CronError                   a cron job is invalid
    ├── SpawnError                  a child program could not be started (vikingbot.proc)
    ├── AgentError                  an agent loop's own agent failed (e.g. an ACP agent process)
    ├── SkillError                  a skill could not be added or removed (skills/manage.py)
    ├── McpError                    an MCP server cannot start, answer or be reached (vikingbot.mcp)
    ├── MediaError                  a file a person sent cannot be taken in (media/types.py)
    ├── McpRefused                  a call to the bot's own MCP server refused (mcp_server/door.py)
    ├── NoServiceManager            no user service manager here (service/manager.py)
    ├── ServiceCommandFailed        systemctl/launchctl refused a step (service/manager.py)
    ├── MemoryRefused               a memory change or undo was refused (memory/versions.py)
    ├── GatewayRunning              another gateway holds this home (gateway/lock.py)
    ├── GatewayUnavailable          the CLI cannot reach the gateway (gateway/client.py)
    ├── GatewayRefused              the gateway answered with an error (gateway/client.py)
    ├── BadRequest                  a control request answered 400 (gateway/errors.py)
    ├── NotFound                    a control request answered 404 (gateway/errors.py)
    └── ClientGone                  a control request's client hung up mid-turn (gateway/control.py)

Classes defined in this module are the ones several packages catch; a class
only one package raises and catches lives there (the module is named above).
`tests/test_errors_tree.py` fails when this drawing and the code disagree.

Vendor SDK errors are converted at the provider/channel boundary; nothing
outside those modules catches SDK exception types.
"""

from __future__ import annotations


class VikingbotError(Exception):
    """Root of all vikingbot errors. The message is meant for the user."""


class ConfigError(VikingbotError):
    pass


class SessionError(VikingbotError):
    pass


class WorkspaceError(VikingbotError):
    pass


class StoreError(VikingbotError):
    pass


class ProviderError(VikingbotError):
    pass


class ProviderAuthError(ProviderError):
    pass


class ProviderNotFoundError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    """The provider cannot serve now (connection error, timeout, 429, 5xx): an outage,
    not a problem with the request. The heartbeat charges no retry for it."""


class ProviderUnreachable(ProviderUnavailable):
    pass


class ContextTooLongError(ProviderError):
    pass


class NotConfiguredError(VikingbotError):
    pass


class ToolError(VikingbotError):
    pass


class HeartbeatError(VikingbotError):
    pass


class EntryError(HeartbeatError):
    def __init__(self, message: str, line: int | None = None, path: str | None = None) -> None:
        self.line = line
        self.path = path
        where = ""
        if path and line:
            where = f"{path}:{line}: "
        elif line:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")
        self.reason = message


class CheckerError(VikingbotError):
    pass


class ChannelError(VikingbotError):
    pass


class ChannelRejected(ChannelError):
    """The platform refused the message for good (unknown chat, no access): no retry."""


class ChannelBusy(ChannelError):
    """The platform asked us to slow down; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeliveryError(VikingbotError):
    pass


class CronError(VikingbotError):
    pass


class SpawnError(VikingbotError):
    """A program could not be started; ``program`` names it, ``missing`` if not found."""

    def __init__(self, message: str, *, program: str, missing: bool = False) -> None:
        super().__init__(message)
        self.program = program
        self.missing = missing


class McpError(VikingbotError):
    """An MCP server could not start, answer or be reached; the message names the server."""


class AgentError(VikingbotError):
    pass
