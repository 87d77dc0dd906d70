"""`vikingbot mcp ...`: the MCP servers the agent gets as tools (docs/mcp.md).

``list`` reads the config (and the running gateway's view of each server, when there
is one); ``tools`` and ``probe`` connect from this process, then stop what they
started; ``add`` / ``remove`` edit the config file; ``trust`` approves a server as it
is configured now, after its entry was pointed elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.config.loader import Paths
    from vikingbot.config.schema import Config
    from vikingbot.mcp.hub import McpHub

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]


def _hub(config: Config, paths: Paths) -> McpHub:
    from vikingbot.config.loader import home_environ
    from vikingbot.mcp.client import START_TIMEOUT_S
    from vikingbot.mcp.hub import McpHub

    return McpHub(
        config,
        environ=home_environ(paths.home),
        logs=paths.logs_dir,
        pins=paths.data_dir / "mcp" / "approved.json",
        turn_wait_s=START_TIMEOUT_S,  # these commands exist to connect: wait for the start
    )


def _only(config: Config, server: str | None) -> Config:
    """``config`` with just ``server`` (exit 1 naming the configured ones if unknown)."""
    servers = config.bot.tools.mcp_servers
    if server is None:
        return config
    if server not in servers:
        from vikingbot.grammar import closest

        hint = closest(server, list(servers))
        also = f"; did you mean {hint}?" if hint else ""
        fail(f"no MCP server {server!r} (configured: {', '.join(servers) or 'none'}){also}")
    copy = config.model_copy(deep=True)
    copy.bot.tools.mcp_servers = {server: servers[server].model_copy(update={"enabled": True})}
    return copy


def _gateway_view(ctx: typer.Context) -> dict[str, Any]:
    """The running gateway's status of each server, by name ({} without a gateway)."""
    from vikingbot.cli.remote import gateway_client
    from vikingbot.errors import VikingbotError

    client = gateway_client(ctx)
    if client is None:
        return {}
    try:
        health = client.get("/health", timeout=5)
    except VikingbotError:
        return {}
    return {row["name"]: row for row in health.get("mcp", []) if isinstance(row, dict)}


@app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOpt = False) -> None:
    """Each configured server: transport, what it runs, state in the gateway, problems."""
    config, _ = get_config(ctx)
    live = _gateway_view(ctx)
    rows = []
    for name, cfg in config.bot.tools.mcp_servers.items():
        seen = live.get(name, {})
        rows.append(
            {
                "name": name,
                "type": cfg.kind,
                "runs": cfg.shown,
                "enabled": cfg.enabled,
                "eager": cfg.eager,
                "enabled_tools": cfg.enabled_tools,
                "state": seen.get("state") or ("disabled" if not cfg.enabled else "not started"),
                "tools": seen.get("tools"),
                "problem": seen.get("problem"),
            }
        )
    if json:
        print_json({"gateway": bool(live), "servers": rows})
        return
    from vikingbot.cli.tables import Col, print_table

    print_table(
        "MCP servers",
        [
            Col("server"),
            Col("type"),
            Col("state"),
            Col("tools", right=True),
            Col("runs", wrap=True),
        ],
        [
            (
                r["name"],
                r["type"],
                r["state"],
                "" if r["tools"] is None else str(r["tools"]),
                r["runs"],
            )
            for r in rows
        ],
        notes=[r["problem"] for r in rows],
        empty="No MCP servers (add one: vikingbot mcp add NAME -- COMMAND ARGS...)",
    )


@app.command("tools")
def tools_cmd(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Argument(help="Only this server.")] = None,
    json: JsonOpt = False,
) -> None:
    """Tool names as the model sees them, and whether unattended turns may run each."""
    from vikingbot.agent.approval import decide
    from vikingbot.mcp.tool import McpTool

    config, paths = get_config(ctx)
    hub = _hub(_only(config, server), paths)

    async def run() -> tuple[dict[str, Any], list[str]]:
        try:
            return await hub.tools_for(unattended=False), hub.problems()
        finally:
            await hub.aclose()

    tools, problems = asyncio.run(run())
    rows = []
    for name, tool in sorted(tools.items()):
        assert isinstance(tool, McpTool)
        verdict = decide(config, name, read_only=False, unattended=True, mcp=tool.action())
        rows.append(
            {
                "name": name,
                "server": tool.server,
                "tool": tool.tool,
                "unattended": verdict.approved,
                "why": verdict.reason,
            }
        )
    if json:
        print_json({"tools": rows, "problems": problems})
    else:
        from vikingbot.cli.tables import Col, print_table

        print_table(
            "MCP tools",
            [Col("name"), Col("unattended"), Col("server")],
            [(str(r["name"]), "yes" if r["unattended"] else "no", str(r["server"])) for r in rows],
            empty="No MCP tools",
        )
        for problem in problems:
            typer.echo(f"problem: {problem}", err=True)
    if problems and not rows:
        raise typer.Exit(1)


@app.command("probe")
def probe_cmd(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server to connect to.")],
    json: JsonOpt = False,
) -> None:
    """Connect to one server, list its tools, and say how long it took."""
    from loguru import logger

    config, paths = get_config(ctx)
    hub = _hub(_only(config, server), paths)
    missing = _missing_sdk()
    if missing:
        fail(missing)

    async def run() -> tuple[float, int, list[str]]:
        began = time.perf_counter()
        try:
            tools = await hub.tools_for(unattended=False)
            return time.perf_counter() - began, len(tools), hub.problems()
        finally:
            await hub.aclose()

    logger.disable("vikingbot.mcp")  # each failure is said once, below, not also logged
    try:
        took, count, problems = asyncio.run(run())
    finally:
        logger.enable("vikingbot.mcp")
    problems = list(dict.fromkeys(problems))
    ok = not problems or count > 0
    if json:
        print_json(
            {
                "server": server,
                "ok": ok,
                "seconds": round(took, 3),
                "tools": count,
                "problems": problems,
            }
        )
    elif ok:
        typer.echo(f"✓ {server}: {count} tool(s) in {took:.2f} s")
    if not ok:
        fail("; ".join(problems))


@app.command("add", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The server's name (tools: mcp_<name>_<tool>).")],
    command: Annotated[list[str] | None, typer.Argument(help="-- COMMAND ARGS... (stdio)")] = None,
    url: Annotated[str | None, typer.Option("--url", help="An HTTP server's URL.")] = None,
    sse: Annotated[bool, typer.Option("--sse", help="The URL is a legacy SSE server.")] = False,
    header: Annotated[list[str] | None, typer.Option("--header", help="K=V (HTTP)")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="K=V (stdio)")] = None,
) -> None:
    """Add (or replace) a server: `add NAME -- COMMAND ARGS...` or `add NAME --url URL`."""
    from vikingbot.config.edit import set_value
    from vikingbot.errors import ConfigError

    argv = [*(command or []), *ctx.args]
    if bool(argv) == bool(url):
        fail("give either -- COMMAND ARGS... or --url URL", code=2)
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]} if argv else {"url": url}
    if sse:
        entry["type"] = "sse"
    for key, pairs in (("headers", header), ("env", env)):
        if pairs:
            bad = [p for p in pairs if "=" not in p]
            if bad:
                fail(f"--{key[:-1] if key == 'headers' else key} {bad[0]!r}: expected K=V", code=2)
            entry[key] = dict(p.split("=", 1) for p in pairs)
    config, paths = get_config(ctx)
    try:
        set_value(paths.config_file, ["bot", "tools", "mcp_servers", name], entry)
    except ConfigError as exc:
        fail(str(exc))
    _hub(config, paths).pins.set(name, None)  # the owner chose it: approvals pin anew
    from vikingbot.cli.typed import typed

    typer.echo(f"added MCP server {name}; check it with: {typed('mcp', 'probe', name)}")
    missing = _missing_sdk()
    if missing:
        typer.echo(f"! {missing}", err=True)
    from vikingbot.cli.config_apply import tell_gateway

    tell_gateway(ctx, f"bot.tools.mcp_servers.{name}", None)  # the next turn offers it


def _missing_sdk() -> str | None:
    """What to install when the MCP SDK is not (the ``mcp`` extra), else None."""
    import importlib.util

    if importlib.util.find_spec("mcp") is not None:
        return None
    from vikingbot.extras import hint

    return f"the MCP SDK is not installed (the 'mcp' extra): {hint('mcp')}"


@app.command("remove")
def remove_cmd(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The server to remove.")]
) -> None:
    """Remove a server from the config (its approvals go with it)."""
    from vikingbot.config.edit import remove_value
    from vikingbot.errors import ConfigError

    config, paths = get_config(ctx)
    _only(config, name)
    try:
        remove_value(paths.config_file, ["bot", "tools", "mcp_servers", name])
    except ConfigError as exc:
        fail(str(exc))
    _hub(config, paths).pins.set(name, None)
    typer.echo(f"removed MCP server {name}")
    from vikingbot.cli.config_apply import tell_gateway

    tell_gateway(ctx, f"bot.tools.mcp_servers.{name}", None)


@app.command("trust")
def trust_cmd(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The server to approve.")]
) -> None:
    """Approve a server as it is configured now (after its entry was pointed elsewhere)."""
    from vikingbot.mcp.pins import fingerprint

    config, paths = get_config(ctx)
    _only(config, name)
    identity = config.bot.tools.mcp_servers[name].identity
    _hub(config, paths).pins.set(name, fingerprint(identity))
    typer.echo(
        f"approvals of MCP server {name} now hold for: {fingerprint(identity).split(' ', 1)[1]}"
    )


@app.command("serve")
def serve_cmd(
    ctx: typer.Context,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only", help="Refuse the tools that change something (add, complete, run)."
        ),
    ] = False,
    name: Annotated[str, typer.Option("--name", help="The client's name in the audit.")] = "stdio",
) -> None:
    """Serve the bot as an MCP server on stdin/stdout (for Claude Code, Cursor, ...).

    Runs and plans go through the running gateway when there is one, else run here.
    """
    from urllib.parse import quote

    from vikingbot.cli.remote import gateway_client
    from vikingbot.gateway import compose
    from vikingbot.gateway.ops import heartbeat_plan, heartbeat_run_now
    from vikingbot.logs import quiet
    from vikingbot.mcp_server.door import Caller
    from vikingbot.mcp_server.server import serve_stdio

    quiet()  # stdout is the protocol's
    config, paths = get_config(ctx)
    home = compose.build_home(config, paths)
    client = gateway_client(ctx)
    local: list[Any] = []

    def svc() -> Any:
        if not local:
            local.append(compose.heartbeat(home))
        return local[0]

    async def plan(workspace: str | None) -> dict[str, Any]:
        if client is not None:
            path = "/api/v1/heartbeat/plan" + (
                f"?workspace={quote(workspace)}" if workspace else ""
            )
            return dict(await asyncio.to_thread(client.request, "GET", path))
        return await asyncio.to_thread(heartbeat_plan, svc(), workspace)

    async def run_now(workspace: str | None) -> Any:
        if client is not None:
            body = {"workspace": workspace, "force": False}
            return await asyncio.to_thread(
                client.request, "POST", "/api/v1/heartbeat/run-now", body
            )
        return {"results": await heartbeat_run_now(svc(), workspace=workspace, force=False)}

    door = compose.bot_door(home, plan=plan, run_now=run_now)

    async def serve() -> None:
        try:
            await serve_stdio(door, Caller(name, write=not read_only))
        finally:
            await home.aclose()

    asyncio.run(serve())
