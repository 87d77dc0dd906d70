"""After ``config set``: ask the running gateway to apply the change now, and say what it did.

The gateway re-reads the config and answers with what it applied
(``POST /api/v1/config/apply``, a ``gateway/applying.Report``): the command returns
only then, so a chat right after ``config set`` of the key finds the gateway ready.
A key the gateway reads only at start (``gateway/applying.RESTART_KEYS``) is saved
for the next start and refused live: "restart the gateway to apply", exit 1. With
no gateway running, the next start reads the file.
"""

from __future__ import annotations

from typing import Any

import typer

APPLY_TIMEOUT_S = 30.0


def verdict(key: str, report: dict[str, Any], pid: int) -> tuple[bool, list[str]]:
    """(applied, lines to print) for a gateway's answer to a change of ``key``; pure."""
    from vikingbot.gateway.applying import RESTART_HINT, waiting_for_restart

    if report.get("error"):
        return False, [f"the running gateway (pid {pid}) did not apply it: {report['error']}"]
    lines: list[str] = []
    ok = True
    for row in report.get("channels") or []:
        if row.get("ok"):
            verb = {"start": "started", "stop": "stopped", "restart": "restarted"}
            lines.append(f"channel {row['channel']} {verb.get(row['action'], row['action'])}")
        else:
            ok = False
            lines.append(f"channel {row['channel']} did not start: {row.get('error')}")
    waiting = waiting_for_restart(key, list(report.get("restart_needed") or []))
    if waiting:
        ok = False
        keys = ", ".join(waiting)
        lines.append(
            f"the running gateway (pid {pid}) reads {keys} only when it starts: {RESTART_HINT}"
        )
    elif ok:
        lines.insert(0, f"applied by the running gateway (pid {pid})")
    return ok, lines


def tell_gateway(ctx: typer.Context, key: str, said: str | None) -> None:
    """Print ``said`` with whether the running gateway applied it; exit 1 when it did not.
    ``said`` None: the command printed its own line; only the gateway's answer is added
    (nothing without a gateway)."""
    from vikingbot.cli.common import err_console
    from vikingbot.cli.remote import gateway_client
    from vikingbot.gateway.client import GatewayRefused, GatewayUnavailable

    console = err_console()
    client = gateway_client(ctx)
    if client is None:
        if said is not None:
            console.print(f"[green]✓[/] {said}", highlight=False, soft_wrap=True)
        return
    pid = client.info.pid
    what = said or key
    try:
        report = client.request("POST", "/api/v1/config/apply", {}, timeout=APPLY_TIMEOUT_S)
    except (GatewayUnavailable, GatewayRefused) as exc:
        console.print(
            f"[red]✗[/] {what}: saved, but the running gateway (pid {pid}) did not confirm "
            f"it applied it: {exc}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    ok, lines = verdict(key, report if isinstance(report, dict) else {}, pid)
    if said is not None or not ok:
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        head = what if ok else f"{what}: saved, not applied"
        console.print(f"{mark} {head}", highlight=False, soft_wrap=True)
    for line in lines:
        console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    if not ok:
        raise typer.Exit(1)
