"""The dashboard's Pairing page: the codes strangers were given, each with Approve / Deny.

A button does what ``vikingbot pair approve|deny CODE`` does, through the same control
action (``ControlOps.pair`` → ``PairingDesk.act``): the sender is added to that
channel's ``allow_from`` in the config file and in the running channel, and the step
is audited (``pairing.*``). The forms are POSTs behind the dashboard's guard (login
and CSRF token), like every other dashboard form.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from vikingbot.dashboard.app import Dashboard
from vikingbot.errors import VikingbotError

VERBS = frozenset({"approve", "deny"})


async def _show(
    dash: Dashboard, request: Request, *, notice: str = "", error: str = "", status: int = 200
) -> Response:
    try:
        pending = (await dash.parts.ops.pair("list", "")).get("pending", [])
    except VikingbotError as exc:
        pending, error = [], error or str(exc)
    response = dash.page(
        request, "pairing.html", "pairing", pending=pending, notice=notice, error=error
    )
    response.status_code = status
    return response


async def page(dash: Dashboard, request: Request) -> Response:
    return await _show(dash, request)


def said(result: dict[str, Any]) -> str:
    """What the page tells after a button (the CLI's wording)."""
    if "denied" in result:
        return f"Denied {result['denied']}: the code is dropped."
    when = "applied now" if result.get("applied") else "applied when the gateway starts"
    return f"Let {result.get('approved')} in: added to allow_from ({when})."


async def act(dash: Dashboard, request: Request) -> Response:
    verb = str(request.path_params["verb"])
    if verb not in VERBS:
        return await _show(dash, request, error=f"no action {verb[:20]!r}", status=404)
    code = (await dash.form(request)).get("code", "")[:40]
    try:
        result = await dash.parts.ops.pair(verb, code)
    except VikingbotError as exc:
        return await _show(dash, request, error=str(exc), status=409)
    if not result.get("ok"):
        return await _show(dash, request, error=str(result.get("error")), status=409)
    return await _show(dash, request, notice=said(result))


def routes(dash: Dashboard) -> list[BaseRoute]:
    async def show(request: Request) -> Response:
        return await page(dash, request)

    async def post(request: Request) -> Response:
        return await act(dash, request)

    return [
        Route("/pairing", show),
        Route("/pairing/{verb}", post, methods=["POST"]),
    ]
