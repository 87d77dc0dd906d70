"""Install, remove and ask about the gateway's user service.

Linux: a systemd *user* unit under ``$XDG_CONFIG_HOME/systemd/user`` driven by
``systemctl --user``. macOS: a LaunchAgent under ``~/Library/LaunchAgents`` driven
by ``launchctl``. Anywhere else (a container without a user manager, Windows) there
is nothing to install into: ``NoServiceManager`` says so and names the command to
run in the foreground.

Every command runs through ``vikingbot.proc`` (bounded, its own process group).
Nothing is written before the service manager answered: a manager that cannot be
reached leaves no half-installed file behind.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from vikingbot import proc
from vikingbot.errors import SpawnError, VikingbotError
from vikingbot.fsutil import atomic_write_text
from vikingbot.service.units import LABEL, Launch, launchd_plist, systemd_unit

Kind = Literal["systemd", "launchd"]
UNIT_NAME = "vikingbot.service"
COMMAND_TIMEOUT_S = 30.0


class NoServiceManager(VikingbotError):
    """No user service manager here (or it cannot be reached)."""


class ServiceCommandFailed(VikingbotError):
    """The service manager refused a step."""


@dataclass(frozen=True)
class Target:
    """Where the service lives: which manager, which file, how to address it."""

    kind: Kind
    path: Path
    uid: int

    @property
    def launchd_domain(self) -> str:
        return f"gui/{self.uid}"


@dataclass(frozen=True)
class Change:
    """What ``install`` does: the file's new text, its state, the commands after."""

    target: Target
    text: str
    state: Literal["new", "stale", "current"]
    commands: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class Status:
    installed: bool
    path: Path
    manager: dict[str, str]  # the service manager's own words (ActiveState, pid, ...)


def detect(
    environ: Mapping[str, str], platform: str = sys.platform, prefer: Kind | None = None
) -> Target:
    """The user service manager of this machine, or ``NoServiceManager``."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    kind: Kind | None = prefer
    if kind is None:
        if platform == "darwin" and proc.which("launchctl", environ):
            kind = "launchd"
        elif platform.startswith("linux") and proc.which("systemctl", environ):
            kind = "systemd"
    if kind is None:
        raise NoServiceManager(f"no user service manager on this system ({platform})")
    home = Path(environ.get("HOME") or Path.home())
    if kind == "systemd":
        config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
        return Target("systemd", config / "systemd" / "user" / UNIT_NAME, uid)
    return Target("launchd", home / "Library" / "LaunchAgents" / f"{LABEL}.plist", uid)


def foreground_command(launch: Launch) -> str:
    return shlex.join(launch.argv)


def plan_install(target: Target, launch: Launch) -> Change:
    """What install would write and run (nothing is touched)."""
    text = systemd_unit(launch) if target.kind == "systemd" else launchd_plist(launch)
    try:
        old = target.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError):
        old = ""
    state: Literal["new", "stale", "current"] = (
        "new" if old is None else "current" if old == text else "stale"
    )
    if target.kind == "systemd" and state == "current":
        # nothing changed: make sure it is enabled and running, without a restart
        commands = [
            ["systemctl", "--user", "enable", UNIT_NAME],
            ["systemctl", "--user", "start", UNIT_NAME],
        ]
    elif target.kind == "systemd":
        commands = [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", UNIT_NAME],
            # restart, not start: a stale unit that is running picks up the new one
            ["systemctl", "--user", "restart", UNIT_NAME],
        ]
    else:
        commands = [
            ["launchctl", "bootout", f"{target.launchd_domain}/{LABEL}"],
            ["launchctl", "bootstrap", target.launchd_domain, str(target.path)],
        ]
    return Change(target, text, state, commands)


def plan_uninstall(target: Target) -> list[list[str]]:
    if target.kind == "systemd":
        return [
            ["systemctl", "--user", "disable", "--now", UNIT_NAME],
            ["systemctl", "--user", "daemon-reload"],
        ]
    return [["launchctl", "bootout", f"{target.launchd_domain}/{LABEL}"]]


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> proc.Finished:
    try:
        return asyncio.run(
            proc.run(list(argv), timeout_s=COMMAND_TIMEOUT_S, env=dict(environ), merge_stderr=True)
        )
    except SpawnError as exc:
        raise NoServiceManager(f"{argv[0]} could not be started: {exc}") from exc


def _words(done: proc.Finished) -> str:
    return " ".join(done.text.split())[:300] or f"exit status {done.returncode}"


def reachable(target: Target, environ: Mapping[str, str]) -> None:
    """Raise ``NoServiceManager`` unless the user's service manager answers."""
    argv = (
        ["systemctl", "--user", "show-environment"]
        if target.kind == "systemd"
        else ["launchctl", "print", target.launchd_domain]
    )
    done = _run(argv, environ)
    if done.returncode != 0:
        raise NoServiceManager(f"`{shlex.join(argv)}` failed: {_words(done)}")


def install(change: Change, environ: Mapping[str, str]) -> list[str]:
    """Write the file (atomically) and run the commands; the lines to print."""
    reachable(change.target, environ)
    said: list[str] = []
    if change.state != "current":
        change.target.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(change.target.path, change.text)
        verb = "wrote" if change.state == "new" else "rewrote the stale"
        said.append(f"{verb} {change.target.path}")
    else:
        said.append(f"{change.target.path} is current")
    for argv in change.commands:
        done = _run(argv, environ)
        unloaded = argv[:2] == ["launchctl", "bootout"]  # fails when it was not loaded: fine
        if done.returncode != 0 and not unloaded:
            raise ServiceCommandFailed(f"`{shlex.join(argv)}` failed: {_words(done)}")
        said.append(f"ran {shlex.join(argv)}")
    return said


def uninstall(target: Target, environ: Mapping[str, str]) -> list[str]:
    """Stop and remove the service; says so when there was none."""
    if not target.path.exists():
        return [f"nothing to uninstall: no service file at {target.path}"]
    reachable(target, environ)
    said = []
    for argv in plan_uninstall(target)[:1]:
        _run(argv, environ)  # stopping a unit that is not loaded is not an error here
        said.append(f"ran {shlex.join(argv)}")
    target.path.unlink()
    said.append(f"removed {target.path}")
    for argv in plan_uninstall(target)[1:]:
        _run(argv, environ)
        said.append(f"ran {shlex.join(argv)}")
    return said


SYSTEMD_PROPS = ("LoadState", "ActiveState", "SubState", "MainPID", "UnitFileState")


def status(target: Target, environ: Mapping[str, str]) -> Status:
    """The service manager's view (empty when it cannot be asked)."""
    installed = target.path.exists()
    if target.kind == "systemd":
        argv = ["systemctl", "--user", "show", UNIT_NAME, "--property=" + ",".join(SYSTEMD_PROPS)]
    else:
        argv = ["launchctl", "print", f"{target.launchd_domain}/{LABEL}"]
    try:
        done = _run(argv, environ)
    except NoServiceManager as exc:
        return Status(installed, target.path, {"error": str(exc)})
    if done.returncode != 0:
        return Status(installed, target.path, {"error": _words(done)})
    return Status(installed, target.path, parse_status(target.kind, done.text))


def parse_status(kind: Kind, text: str) -> dict[str, str]:
    """``Key=value`` lines (systemctl show) or ``key = value`` lines (launchctl print)
    as a dict; total: unknown lines are ignored."""
    found: dict[str, str] = {}
    sep = "=" if kind == "systemd" else " = "
    wanted = set(SYSTEMD_PROPS) if kind == "systemd" else {"state", "pid", "last exit code"}
    for line in text.splitlines():
        key, eq, value = line.strip().partition(sep)
        if eq and key in wanted and key not in found:
            found[key] = value.strip()
    return found
