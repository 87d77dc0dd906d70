"""`vikingbot onboard`: set up a home in one conversation.

Each question has a default (Enter takes it; on a second run the current setting)
and is checked before the next is asked. Nothing is written until the last
answer: Ctrl-C or Ctrl-D at any question leaves the config as it was. The answers
are written through the same validated path as `vikingbot config set`; a secret
is read without echo and never printed back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from vikingbot.cli.common import fail, get_config, print_json, state
from vikingbot.cli.typed import typed
from vikingbot.onboard import (
    ACP_RECIPES,
    CLI_SESSION,
    PROVIDERS,
    PUSH_TARGET,
    Answers,
    add_task,
    config_changes,
)

if TYPE_CHECKING:
    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config

Ask = Callable[..., str]
CHANNEL_SECRETS = {"telegram": ["token"], "slack": ["bot_token", "app_token"]}
OWNER_HINT = {
    "telegram": "your Telegram user id (a number; @userinfobot tells it)",
    "slack": "your Slack member id (U…)",
}


class Cancelled(Exception):
    """Ctrl-C or Ctrl-D at a question."""


def _prompt_asker() -> Ask:
    import getpass

    from prompt_toolkit import PromptSession

    session: PromptSession[str] = PromptSession()

    def ask(question: str, default: str = "", *, secret: bool = False) -> str:
        shown = "" if secret or not default else f" [{default}]"
        try:
            if secret:  # the terminal's own no-echo mode: prompt_toolkit echoes on TERM=dumb
                text = getpass.getpass(f"{question}: ")
            else:
                text = session.prompt(f"{question}{shown}: ")
        except (KeyboardInterrupt, EOFError):
            raise Cancelled from None
        return text.strip() or default

    return ask


def _choose(ask: Ask, question: str, choices: list[str], default: str) -> str:
    while True:
        answer = ask(f"{question} ({', '.join(choices)})", default).lower()
        if answer in choices:
            return answer
        typer.echo(f"  please answer one of: {', '.join(choices)}")


def _yes(ask: Ask, question: str, default: bool) -> bool:
    while True:
        answer = ask(f"{question} (y/n)", "y" if default else "n").lower()
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")
        typer.echo("  please answer y or n")


def _system_timezone() -> str:
    try:
        from tzlocal import get_localzone_name

        return get_localzone_name() or "UTC"
    except Exception:  # tzlocal raises its own errors for odd systems
        return "UTC"


def _acp_found() -> list[str]:
    return [name for name, r in ACP_RECIPES.items() if shutil.which(str(r["command"]))]


def _converse(ask: Ask, config: Config, paths: Paths, check: bool) -> Answers:
    """Ask every question; return the answers (nothing written yet)."""
    from vikingbot.heartbeat.parser import parse_heartbeat

    agents = config.bot.agents
    loops = ["builtin", *_acp_found()]
    current_loop = "builtin" if agents.loop != "acp" else loops[-1]
    answers = Answers()
    answers.loop = _choose(ask, "Agent loop", loops, current_loop)
    if answers.loop == "builtin":
        answers.provider = _choose(
            ask, "Model provider", list(PROVIDERS), agents.provider or "openai"
        )
        model, env_name = PROVIDERS[answers.provider]
        same = agents.provider == answers.provider
        answers.model = ask("Model", agents.model if same and agents.model else model)
        current = config.bot.providers.get(answers.provider)
        base = current.api_base if current is not None and current.api_base else ""
        answers.api_base = ask("API base URL (Enter: the provider's own)", base) or None
        answers.api_key = _key(ask, config, paths, answers, env_name, check)
    platforms = ["none", "telegram", "slack", "notify"]
    answers.channel = _choose(
        ask, "Chat platform (notify: results as push notifications)", platforms, "none"
    )
    if answers.channel == "none":
        answers.channel = None
    elif answers.channel == "notify":
        answers.channel_secrets["url"] = _push_url(ask)
        answers.owner = PUSH_TARGET
    else:
        for secret in CHANNEL_SECRETS[answers.channel]:
            while not (value := ask(f"{answers.channel} {secret} (hidden)", secret=True)):
                typer.echo("  a token is needed for this platform")
            answers.channel_secrets[secret] = value
        answers.owner = ask(f"Owner: {OWNER_HINT[answers.channel]}") or None
    tz_default = config.bot.heartbeat.timezone or _system_timezone()
    while True:
        tz = ask("Timezone for daily: entries", tz_default)
        try:
            ZoneInfo(tz)
            answers.timezone = tz
            break
        except (ZoneInfoNotFoundError, ValueError):
            typer.echo(f"  {tz!r} is not an IANA timezone (e.g. Europe/Berlin, America/New_York)")
    typer.echo("A first heartbeat task, for example:")
    typer.echo("  daily: 08:30 title: Morning brief task: Give me today's calendar and todos.")
    while True:
        task = ask("Task for HEARTBEAT.md (Enter: none)")
        if not task:
            break
        errors = parse_heartbeat(f"## Active Tasks\n\n- {task.removeprefix('- ')}\n").errors
        if not errors:
            answers.task = task
            break
        typer.echo(f"  {errors[0].message}")
    return answers


def _push_url(ask: Ask) -> str:
    """An Apprise URL the notify channel accepts (asked again until it does)."""
    from pydantic import ValidationError

    from vikingbot.channels.notify import NotifySettings

    typer.echo("  an Apprise URL, e.g. ntfys://ntfy.sh/<a topic only you know> (the ntfy app)")
    while True:
        url = ask("Push URL (hidden)", secret=True)
        try:
            NotifySettings.model_validate({"targets": {PUSH_TARGET: url}})
            return url
        except ValidationError:
            typer.echo(
                "  not an Apprise URL like ntfys://ntfy.sh/topic (one scheme://..., no spaces)"
            )


def _key(
    ask: Ask, config: Config, paths: Paths, answers: Answers, env_name: str, check: bool
) -> str | None:
    """The API key: from the environment when it is there, else asked for; tested
    with one small real call when ``check``. None keeps what the config has."""
    key: str | None = None
    stored = config.bot.providers.get(answers.provider or "")
    if os.environ.get(env_name):
        typer.echo(f"  using {env_name} from the environment")
    elif stored is not None and stored.api_key is not None:
        key = ask(f"API key ({env_name}; hidden, Enter: keep the stored key)", secret=True) or None
    else:
        key = ask(f"API key ({env_name}; hidden, Enter: set it later)", secret=True) or None
    while check:
        result = _test_call(paths, answers, key)
        if result is None:
            typer.echo("  ✓ the model answered")
            break
        typer.echo(f"  ✗ {result}")
        key = ask("Another API key (hidden, Enter: keep it and go on)", secret=True) or key
        if not _yes(ask, "Test again", True):
            break
    return key


def _test_call(paths: Paths, answers: Answers, key: str | None) -> str | None:
    """None when one small call through the answered provider succeeds, else why not."""
    from vikingbot.config.loader import load_config
    from vikingbot.doctor import check_agent

    # the config as it will be once written: the file's own values (secrets as stored,
    # ${VAR} expanded, environment applied), not a dump of ``config`` (secrets masked)
    key_change = [(f"bot.providers.{answers.provider}.api_key", key)] if key else []
    trial, _ = load_config(
        paths.config_file, create=False, changes=config_changes(answers) + key_change
    )
    # in a throwaway data directory: the test makes no workspace or database in the
    # home, so Ctrl-C at a later question still leaves everything as it was
    with tempfile.TemporaryDirectory(prefix="vikingbot-onboard-") as tmp:
        scratch = replace(paths, data_dir=Path(tmp), database_url=f"sqlite:///{tmp}/state.db")
        done = check_agent(trial, scratch, os.environ, live=True)
    return None if done.status == "ok" else done.message


def _apply(answers: Answers, config_file: Path, heartbeat_md: Path) -> list[str]:
    from vikingbot.config.edit import set_value

    said = []
    for key, value in config_changes(answers):
        set_value(config_file, key, value)
        said.append(key)
    if answers.task:
        add_task(heartbeat_md, answers.task)
    return said


def register(app: typer.Typer) -> None:
    app.command("onboard")(onboard)


def onboard(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print what exists, as JSON.")] = False,
    non_interactive: Annotated[
        bool,
        typer.Option("--non-interactive", help="Ask nothing; take the answers from the flags."),
    ] = False,
    loop: Annotated[str | None, typer.Option(help="builtin, claude, codex or gemini.")] = None,
    provider: Annotated[str | None, typer.Option(help="openai or anthropic.")] = None,
    model: Annotated[str | None, typer.Option(help="The model name.")] = None,
    api_base: Annotated[str | None, typer.Option(help="An OpenAI-compatible URL.")] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA timezone.")] = None,
    task: Annotated[str | None, typer.Option(help="A first HEARTBEAT.md entry.")] = None,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Test the key with one real call.")
    ] = True,
    install_service: Annotated[
        bool | None,
        typer.Option("--install-service/--no-install-service", help="Run as a service."),
    ] = None,
) -> None:
    """Set up this home: in a terminal, a short conversation (re-run to change an
    answer); otherwise create what is missing and apply the flags given.

    The API key is read from the provider's environment variable (OPENAI_API_KEY,
    ANTHROPIC_API_KEY) or asked for without echo; it is never a flag.
    """
    import sys

    from vikingbot.errors import VikingbotError
    from vikingbot.gateway.compose import build_home
    from vikingbot.logs import setup_logging
    from vikingbot.onboard import ensure_first_start

    talk = not (non_interactive or as_json) and sys.stdin.isatty() and sys.stdout.isatty()
    config, paths = get_config(ctx, create=False)  # a cancelled conversation writes nothing
    try:
        if talk:
            ask = _prompt_asker()
            typer.echo(f"Setting up {paths.home} (Ctrl-C leaves everything as it was)")
            answers: Answers | None = _converse(ask, config, paths, check)
            service = (
                install_service
                if install_service is not None
                else _yes(ask, "Run the gateway as a service (starts at login)", False)
            )
        else:
            answers = _from_flags(loop, provider, model, api_base, timezone, task)
            if answers is not None and check and answers.provider:
                env_name = PROVIDERS[answers.provider][1]
                problem = _test_call(paths, answers, os.environ.get(env_name))
                if problem:
                    fail(f"the model did not answer: {problem}")
            service = bool(install_service)
    except Cancelled:
        typer.echo("\ncancelled: nothing was changed")
        raise typer.Exit(1) from None
    # what was created goes to stderr (INFO); debug lines only with --verbose
    setup_logging(verbose=state(ctx).verbose)
    config, paths = get_config(ctx)  # creates the config file when missing
    rt = build_home(config, paths)
    try:
        created = {k: str(v) for k, v in ensure_first_start(rt).items()}
        heartbeat_md = rt.workspaces.workspace_for(CLI_SESSION) / "HEARTBEAT.md"
        changed = _apply(answers, paths.config_file, heartbeat_md) if answers else []
    except VikingbotError as exc:
        fail(str(exc))
    finally:
        rt.close()
    if as_json:
        print_json(created)
        return
    if not talk:
        for name, where in created.items():
            typer.echo(f"{name + ':':<11}{where}")
    if changed:
        typer.echo(f"✓ wrote {len(changed)} settings to {paths.config_file}")
    if answers is not None and answers.task:
        typer.echo(f"✓ added the task to {heartbeat_md}")
    if service and _install_service(ctx):
        return
    config, _ = get_config(ctx)
    problem = build_home(config, paths).readiness().problem
    if problem:
        typer.echo(f"\nnext: {problem}")
    else:
        typer.echo(f"Next: `{typed('gateway')}` starts it; `{typed('chat')}` talks to it.")


def _install_service(ctx: typer.Context) -> bool:
    """Install the user service; False (said why, nothing failed) when this system has
    no user service manager: the settings are written, the gateway runs in a terminal."""
    from vikingbot.cli.service_cmd import foreground, install_or_why

    why = install_or_why(ctx)
    if why is None:
        return True
    typer.echo(
        f"no user service here ({why}); the settings are written: run the gateway in a "
        f"terminal with `{foreground(ctx)}`"
    )
    return False


def _from_flags(
    loop: str | None,
    provider: str | None,
    model: str | None,
    api_base: str | None,
    timezone: str | None,
    task: str | None,
) -> Answers | None:
    """The answers the flags give; None when no flag was given (only create the home)."""
    if not any((loop, provider, model, api_base, timezone, task)):
        return None
    if loop is not None and loop != "builtin" and loop not in ACP_RECIPES:
        fail(f"--loop must be builtin or one of {', '.join(ACP_RECIPES)}, not {loop!r}", code=2)
    if provider is not None and provider not in PROVIDERS:
        fail(f"--provider must be one of {', '.join(PROVIDERS)}, not {provider!r}", code=2)
    if timezone is not None:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            fail(f"--timezone {timezone!r} is not an IANA timezone", code=2)
    return Answers(
        loop=loop,
        provider=provider,
        model=model or (PROVIDERS[provider][0] if provider else None),
        api_base=api_base,
        timezone=timezone,
        task=task,
    )
