"""The service files, as text: pure functions of what the gateway is started with.

A unit starts ``<python> -m vikingbot --config <file> gateway`` with ``VIKINGBOT_HOME``
set, so the service runs the same installation, home and config as the command that
installed it. The first line says which vikingbot wrote it; ``install`` rewrites a
file whose text differs from what it would write now (a stale unit after an upgrade).
"""

from __future__ import annotations

import plistlib
from dataclasses import dataclass
from pathlib import Path

MARK = "# vikingbot service"
LABEL = "dev.vikingbot.gateway"


@dataclass(frozen=True)
class Launch:
    """What the service runs: the interpreter, the home and config, the log folder."""

    python: Path
    home: Path
    config: Path
    logs_dir: Path
    version: str

    @property
    def argv(self) -> list[str]:
        return [str(self.python), "-m", "vikingbot", "--config", str(self.config), "gateway"]


def _systemd_quote(arg: str) -> str:
    """One ExecStart= word: double-quoted, with ``\\``, ``"``, ``%`` and ``$`` escaped
    (systemd expands specifiers and variables inside quotes too)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def _systemd_path(path: Path) -> str:
    """A path setting (WorkingDirectory=): unquoted, only specifiers escaped; systemd
    takes the whole value as one path, spaces included."""
    return str(path).replace("%", "%%")


def systemd_unit(launch: Launch) -> str:
    """The text of ``vikingbot.service`` for ``systemctl --user``."""
    body = "\n".join(
        [
            "[Unit]",
            f"Description=vikingbot gateway ({_systemd_path(launch.home)})",
            "StartLimitIntervalSec=300",
            "StartLimitBurst=5",
            "",
            "[Service]",
            "Type=simple",
            "ExecStart=" + " ".join(_systemd_quote(a) for a in launch.argv),
            "Environment=" + _systemd_quote(f"VIKINGBOT_HOME={launch.home}"),
            "Environment=PYTHONUNBUFFERED=1",
            f"WorkingDirectory={_systemd_path(launch.home)}",
            "Restart=on-failure",
            "RestartSec=5",
            "TimeoutStopSec=30",
            "NoNewPrivileges=yes",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )
    return f"{MARK} written by vikingbot {launch.version}: vikingbot service install\n{body}"


def launchd_plist(launch: Launch) -> str:
    """The text of the LaunchAgent ``dev.vikingbot.gateway.plist``."""
    data = {
        "Label": LABEL,
        "ProgramArguments": launch.argv,
        "EnvironmentVariables": {"VIKINGBOT_HOME": str(launch.home), "PYTHONUNBUFFERED": "1"},
        "WorkingDirectory": str(launch.home),
        "RunAtLoad": True,
        # restarted when it exits with an error, left stopped after a clean stop
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "StandardOutPath": str(launch.logs_dir / "service.out.log"),
        "StandardErrorPath": str(launch.logs_dir / "service.err.log"),
    }
    body = plistlib.dumps(data, sort_keys=True).decode("utf-8")
    head, _, rest = body.partition("\n")
    note = f"<!-- vikingbot service written by vikingbot {launch.version} -->"
    return f"{head}\n{note}\n{rest}"
