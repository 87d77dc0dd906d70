"""The `vikingbot` entry point: a few calls answered before Typer is even imported.

`vikingbot heartbeat run-now --json` typed while the home's gateway runs is only
an HTTP request and its answer printed; Typer (and the pydantic its option
parsing loads) would cost more than the request. So the exact forms

    heartbeat run-now --json [--force] [-w NAME | --workspace NAME | --workspace=NAME]
                             [-e NAME | --entry NAME]

are parsed here by hand and sent to the gateway with the standard-library client
(vikingbot/gateway/client.py), printing the same JSON as the full command
(``"via": "gateway"``). Anything else (other options, no gateway, a gateway that
wants the token) goes to the Typer app unchanged.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

RUN_NOW_PATH = "/api/v1/heartbeat/run-now"


def parse_run_now(argv: list[str]) -> dict[str, Any] | None:
    """The control-API body for ``heartbeat run-now --json ...``; None for any other argv.

    Total: any list of strings gives a body or None (then Typer parses it and
    explains what is wrong). A repeated option is left to Typer too.
    """
    if argv[:2] != ["heartbeat", "run-now"]:
        return None
    body: dict[str, Any] = {"workspace": None, "force": False, "entry": None}
    as_json = False
    rest = argv[2:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--force" and not body["force"]:
            body["force"] = True
        elif arg in ("-w", "--workspace") and body["workspace"] is None:
            if i + 1 >= len(rest) or not _plain_value(rest[i + 1]):
                return None
            body["workspace"] = rest[i + 1]
            i += 1
        elif arg.startswith("--workspace=") and body["workspace"] is None:
            value = arg.removeprefix("--workspace=")
            if not _plain_value(value):
                return None
            body["workspace"] = value
        elif arg in ("-e", "--entry") and body["entry"] is None:
            if i + 1 >= len(rest) or not _plain_value(rest[i + 1]):
                return None
            body["entry"] = rest[i + 1]
            i += 1
        else:
            return None
        i += 1
    if body["entry"] is None:
        del body["entry"]
    return body if as_json else None


def _plain_value(value: str) -> bool:
    return bool(value) and not value.startswith("-")


def run_now_via_gateway(argv: list[str]) -> bool:
    """Answer ``heartbeat run-now --json`` through the running gateway; ``False``:
    not this form, or no gateway to ask (the Typer app then handles argv)."""
    body = parse_run_now(argv)
    if body is None:
        return False
    from vikingbot.config.paths import home_dir
    from vikingbot.gateway.client import GatewayClient, GatewayRefused, GatewayUnavailable

    client = GatewayClient.find(home_dir())
    if client is None or client.needs_token:
        return False
    try:
        data = client.post(RUN_NOW_PATH, body)
    except GatewayRefused as exc:
        _fail(f"the gateway refused: {exc}")
    except GatewayUnavailable as exc:
        _fail(str(exc))
    rows = [{**row, "via": "gateway"} for row in data["results"]]
    sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return True


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"Error: {message}\n")
    raise SystemExit(1)


def main() -> None:
    if run_now_via_gateway(sys.argv[1:]):
        return
    from vikingbot.cli.app import main as app_main

    app_main()
