"""`vikingbot service ...`: run the gateway as a user service (systemd / launchd)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO, Literal, NoReturn

import typer

from vikingbot.cli.common import fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.service.manager import Target
    from vikingbot.service.units import Launch

app = typer.Typer(no_args_is_help=True)

ManagerOpt = Annotated[
    str | None,
    typer.Option(
        "--manager",
        help="systemd or launchd (default: the one this system has).",
        show_default=False,
    ),
]


def _target(manager: str | None) -> Target | None:
    from vikingbot.service.manager import NoServiceManager, detect

    if manager not in (None, "systemd", "launchd"):
        fail(f"--manager must be systemd or launchd, not {manager!r}", code=2)
    prefer: Literal["systemd", "launchd"] | None = manager  # type: ignore[assignment]
    try:
        return detect(os.environ, prefer=prefer)
    except NoServiceManager:
        return None


def _launch(ctx: typer.Context) -> Launch:
    from vikingbot import __version__
    from vikingbot.service.units import Launch

    _config, paths = get_config(ctx)
    return Launch(
        python=Path(sys.executable),
        home=paths.home.resolve(),
        config=paths.config_file.resolve(),
        logs_dir=paths.logs_dir.resolve(),
        version=__version__,
    )


def _no_manager(ctx: typer.Context, why: str) -> NoReturn:
    fail(
        f"{why}. There is no user service to install here (a container, Windows, or no "
        f"login session); run the gateway in the foreground instead:\n  {foreground(ctx)}"
    )


@app.command("install")
def install_cmd(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be written and run; change nothing.")
    ] = False,
    manager: ManagerOpt = None,
) -> None:
    """Install and start the gateway as a user service (re-run after an upgrade)."""
    why = install_or_why(ctx, dry_run=dry_run, manager=manager)
    if why is not None:
        _no_manager(ctx, why)


def install_or_why(
    ctx: typer.Context, *, dry_run: bool = False, manager: str | None = None
) -> str | None:
    """Install (or with ``dry_run`` show) the user service; why not, when this system
    has no user service manager (a container, no login session): then nothing changed."""
    from vikingbot.errors import VikingbotError
    from vikingbot.service.manager import NoServiceManager, install, plan_install

    launch = _launch(ctx)
    target = _target(manager)
    if target is None:
        return f"no systemd or launchd found on {sys.platform}"
    change = plan_install(target, launch)
    if dry_run:
        typer.echo(f"# {target.path} ({change.state})")
        typer.echo(change.text, nl=False)
        for argv in change.commands:
            typer.echo("$ " + " ".join(argv))
        return None
    try:
        for line in install(change, os.environ):
            typer.echo(line)
    except NoServiceManager as exc:
        return str(exc)
    except VikingbotError as exc:
        fail(str(exc))
    typer.echo(f"the gateway now runs as a {target.kind} user service")
    if target.kind == "systemd":
        typer.echo("to keep it running after you log out: loginctl enable-linger " + _user_name())
    return None


def foreground(ctx: typer.Context) -> str:
    """The gateway in the foreground, as the user runs vikingbot (``uv run vikingbot
    gateway`` in a clone), with the ``--config`` they gave."""
    from vikingbot.cli.typed import typed

    given = ctx.find_root().params.get("config")
    return typed(*(["--config", str(given)] if given else []), "gateway")


def _user_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "$USER"


@app.command("uninstall")
def uninstall_cmd(ctx: typer.Context, manager: ManagerOpt = None) -> None:
    """Stop the service and remove its file."""
    from vikingbot.errors import VikingbotError
    from vikingbot.service.manager import NoServiceManager, uninstall

    target = _target(manager)
    if target is None:
        typer.echo("nothing to uninstall: no systemd or launchd on this system")
        return
    try:
        for line in uninstall(target, os.environ):
            typer.echo(line)
    except NoServiceManager as exc:
        _no_manager(ctx, str(exc))
    except VikingbotError as exc:
        fail(str(exc))


@app.command("status")
def status_cmd(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    manager: ManagerOpt = None,
) -> None:
    """The service manager's view beside the gateway's own (/health)."""
    from vikingbot.gateway.client import GatewayClient, GatewayUnavailable
    from vikingbot.service.manager import status

    _config, paths = get_config(ctx)
    target = _target(manager)
    view: dict[str, object] = {"manager": None, "installed": False, "service": {}}
    if target is not None:
        st = status(target, os.environ)
        view = {
            "manager": target.kind,
            "installed": st.installed,
            "path": str(st.path),
            "service": st.manager,
        }
    client = GatewayClient.find(paths.home, starting_wait_s=0)
    health: object = None
    if client is not None:
        try:
            health = client.get("/health", timeout=3)
        except GatewayUnavailable as exc:
            health = {"status": "unreachable", "error": str(exc)}
    view["gateway"] = health
    if as_json:
        print_json(view)
        return
    if target is None:
        typer.echo("service: no systemd or launchd on this system")
    elif not view["installed"]:
        typer.echo(f"service: not installed ({view['path']})")
    else:
        svc = view["service"]
        assert isinstance(svc, dict)
        words = ", ".join(f"{k}={v}" for k, v in svc.items()) or "no answer"
        typer.echo(f"service: installed ({view['path']}): {words}")
    if isinstance(health, dict):
        typer.echo(f"gateway: {health.get('status', '?')}")
    else:
        typer.echo("gateway: not running on this home")


@app.command("logs")
def logs_cmd(
    ctx: typer.Context,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Lines to show first.")] = 50,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", "-f", help="Keep printing new lines.")
    ] = True,
) -> None:
    """The gateway's log (the service's and a foreground gateway's alike)."""
    _config, paths = get_config(ctx)
    log = paths.logs_dir / "vikingbot.log"
    if not log.exists():
        fail(f"no gateway log yet at {log} (has the gateway run on this home?)")
    with log.open("rb") as fh:
        for line in _tail(fh, max(lines, 0)):
            sys.stdout.write(line.decode("utf-8", "replace"))
        sys.stdout.flush()
        if not follow:
            return
        try:
            while True:
                chunk = fh.readline()
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
                    continue
                if _rotated(fh, log):
                    fh.close()
                    fh = log.open("rb")
                    continue
                time.sleep(0.5)
        except KeyboardInterrupt:
            return


def _tail(fh: BinaryIO, count: int) -> list[bytes]:
    """The last ``count`` lines of an open binary file (reads backwards in blocks)."""
    if count == 0:
        fh.seek(0, os.SEEK_END)
        return []
    fh.seek(0, os.SEEK_END)
    end = fh.tell()
    data = b""
    pos = end
    while pos > 0 and data.count(b"\n") <= count:
        step = min(65536, pos)
        pos -= step
        fh.seek(pos)
        data = fh.read(step) + data
    fh.seek(end)
    return [line + b"\n" for line in data.splitlines()[-count:]]


def _rotated(fh: BinaryIO, log: Path) -> bool:
    try:
        return os.stat(log).st_ino != os.fstat(fh.fileno()).st_ino
    except OSError:
        return False
