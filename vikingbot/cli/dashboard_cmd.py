"""`vikingbot dashboard`: a one-time login link to the running gateway's web dashboard."""

from __future__ import annotations

from typing import Annotated

import typer

from vikingbot.cli.common import fail, get_config


def register(app: typer.Typer) -> None:
    @app.command("dashboard")
    def dashboard_cmd(
        ctx: typer.Context,
        no_open: Annotated[
            bool, typer.Option("--no-open", help="Only print the link; do not open a browser.")
        ] = False,
    ) -> None:
        """Print (and open) a link that logs this browser in to the dashboard.

        The link holds a one-time token that works once, within two minutes; the
        gateway hands it out only to a client holding the home's control secret.
        """
        from vikingbot.gateway.client import GatewayClient, GatewayRefused, GatewayUnavailable

        _, paths = get_config(ctx)
        client = GatewayClient.discover(paths)
        if client is None:
            fail("no gateway is running for this home: start it with `vikingbot gateway`")
        try:
            answer = client.post("/ui/login-token", timeout=10)
        except (GatewayUnavailable, GatewayRefused) as exc:
            fail(str(exc))
        url = client.info.url.rstrip("/") + str(answer["path"])
        typer.echo(url)
        if not no_open:
            import webbrowser

            webbrowser.open(url)
