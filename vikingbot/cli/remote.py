"""The CLI as the gateway's client: find the home's gateway, call it, or say we run locally.

Commands that act (``heartbeat run-now``, ``cron run``, ``chat``, ``inbox``,
``heartbeat enable|disable|pause|resume|status``) go through the control API when
the home's gateway is alive, so results travel through its channels. With no
gateway they run in this process and say so once on stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import typer

from vikingbot.cli.common import fail, get_config

if TYPE_CHECKING:
    from vikingbot.gateway.client import GatewayClient

Via = Literal["gateway", "local"]


def gateway_client(ctx: typer.Context) -> GatewayClient | None:
    """The home's running gateway, or None (the command then runs locally).

    Found from the home directory alone; the config is loaded (for the gateway
    token) only when the gateway listens on a non-loopback address only.
    """
    from vikingbot.config.paths import home_dir
    from vikingbot.gateway.client import GatewayClient

    client = GatewayClient.find(home_dir())
    if client is not None and client.needs_token:
        config, paths = get_config(ctx)
        token = config.bot.gateway.token
        client = GatewayClient.discover(paths, token=token.get_secret_value() if token else None)
    return client


def note_local() -> None:
    from vikingbot.cli.common import err_console
    from vikingbot.gateway.client import NO_GATEWAY_NOTE

    err_console().print(NO_GATEWAY_NOTE, highlight=False, markup=False, soft_wrap=True)


def call(client: GatewayClient, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One control request; on failure print why and exit 1."""
    from vikingbot.gateway.client import GatewayRefused, GatewayUnavailable

    try:
        return client.request(method, path, body)
    except GatewayRefused as exc:
        fail(f"the gateway refused: {exc}")
    except GatewayUnavailable as exc:
        fail(str(exc))
