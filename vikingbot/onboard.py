"""First start: config, data folders, the default workspace, the starter skills, the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.session.types import SessionKey
from vikingbot.skills.discover import user_dir
from vikingbot.skills.starters import install as install_starters

if TYPE_CHECKING:
    from vikingbot.gateway.compose import Home

CLI_SESSION = SessionKey("cli", "default", "local")


def ensure_first_start(rt: Home) -> dict[str, Path]:
    """Create whatever is missing (idempotent); never overwrite a user's file."""
    paths = rt.paths
    for folder in (paths.data_dir, paths.sessions_dir, paths.workspace_root, paths.logs_dir):
        folder.mkdir(parents=True, exist_ok=True)
    workspace = rt.workspaces.workspace_for(CLI_SESSION)
    install_starters(user_dir(paths.home))
    rt.store  # noqa: B018 - opening applies migrations
    return {
        "config": paths.config_file,
        "data": paths.data_dir,
        "workspace": workspace,
        "database": Path(paths.database_url.removeprefix("sqlite:///"))
        if paths.database_url.startswith("sqlite:///")
        else Path(paths.database_url),
    }


# ------------------------------------------------------------ `vikingbot onboard`

PROVIDERS: dict[str, tuple[str, str]] = {
    # provider: (default model, the environment variable its key is read from)
    "openai": ("gpt-4o-mini", "OPENAI_API_KEY"),
    "anthropic": ("claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
}

ACP_RECIPES: dict[str, dict[str, Any]] = {
    # docs/agents.md's recipes: what `vikingbot onboard` offers when the program is found
    "claude": {
        "command": "npx",
        "args": ["-y", "@zed-industries/claude-agent-acp"],
        "env": {"ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}"},
    },
    "codex": {
        "command": "npx",
        "args": ["-y", "@zed-industries/codex-acp"],
        "env": {"OPENAI_API_KEY": "${OPENAI_API_KEY}"},
    },
    "gemini": {
        "command": "gemini",
        "args": ["--experimental-acp"],
        "env": {"GEMINI_API_KEY": "${GEMINI_API_KEY}"},
    },
}


PUSH_TARGET = "phone"  # onboard's name for the one push target it sets up


@dataclass
class Answers:
    """What a user answered; ``None`` leaves that part of the config as it is."""

    loop: str | None = "builtin"  # "builtin", an ACP_RECIPES name, None: leave it
    provider: str | None = None
    model: str | None = None
    api_key: str | None = None  # None: the key stays where it is (environment, config)
    api_base: str | None = None
    channel: str | None = None  # "telegram", "slack", "notify" or None (terminal only)
    channel_secrets: dict[str, str] = field(default_factory=dict)
    owner: str | None = None  # the owner's id on the channel
    timezone: str | None = None
    task: str | None = None


def config_changes(answers: Answers) -> list[tuple[str, Any]]:
    """The ``config set`` keys and values the answers stand for, in order."""
    changes: list[tuple[str, Any]] = []
    if answers.loop in ACP_RECIPES:
        changes.append(("bot.agents.loop", "acp"))
        changes.append(("bot.agents.acp", dict(ACP_RECIPES[answers.loop])))
    else:
        if answers.loop == "builtin":
            changes.append(("bot.agents.loop", "builtin"))
        if answers.provider:
            changes.append(("bot.agents.provider", answers.provider))
        if answers.model:
            changes.append(("bot.agents.model", answers.model))
        if answers.provider and answers.api_key:
            changes.append((f"bot.providers.{answers.provider}.api_key", answers.api_key))
        if answers.provider and answers.api_base:
            changes.append((f"bot.providers.{answers.provider}.api_base", answers.api_base))
    if answers.channel == "notify":  # push notifications: the owner's results, outbound only
        url = answers.channel_secrets["url"]
        changes.append(("bot.channels.notify.targets", {PUSH_TARGET: url}))
        changes.append(("bot.channels.notify.enabled", True))
        changes.append(("bot.owner", f"notify:{PUSH_TARGET}"))
    elif answers.channel:
        section: dict[str, Any] = {"enabled": True, **answers.channel_secrets}
        if answers.owner:
            section["allow_from"] = [answers.owner]
        changes.append((f"bot.channels.{answers.channel}", section))
        if answers.owner:
            changes.append(("bot.owner", f"{answers.channel}:{answers.owner}"))
    if answers.timezone:
        changes.append(("bot.heartbeat.timezone", answers.timezone))
    return changes


def add_task(heartbeat_md: Path, task: str) -> None:
    """Append ``task`` as an entry under ``## Active Tasks`` (created when missing),
    under the file's lock, keeping every other line."""
    from vikingbot.fsutil import locked_edit

    entry = task.strip()
    if not entry.startswith(("- ", "* ", "+ ")):
        entry = f"- {entry}"

    def edit(text: str) -> str:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.strip().lstrip("#").strip().lower() == "active tasks" and line.startswith("##"):
                at = i + 1
                while at < len(lines) and (
                    not lines[at].strip() or lines[at].strip().startswith("<!--")
                ):
                    at += 1
                lines.insert(at, entry)
                break
        else:
            lines += ["", "## Active Tasks", "", entry]
        return "\n".join(lines) + "\n"

    locked_edit(heartbeat_md, edit)
