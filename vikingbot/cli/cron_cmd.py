"""`vikingbot cron ...`: add, list, remove, enable, disable and run scheduled agent jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json

if TYPE_CHECKING:
    from vikingbot.cron.jobs import CronJobs
    from vikingbot.cron.types import CronJob, CronRun
    from vikingbot.gateway.compose import Home

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
NameArg = Annotated[str, typer.Argument(help="Job name, e.g. daily-digest.")]


def _home(ctx: typer.Context) -> Home:
    from vikingbot.gateway.compose import build_home

    config, paths = get_config(ctx)
    return build_home(config, paths)


def _jobs(rt: Home) -> CronJobs:
    from vikingbot.cron.jobs import CronJobs
    from vikingbot.errors import StoreError

    try:
        return CronJobs(rt.store, rt.clock)
    except StoreError as exc:
        fail(str(exc))


def _when(value: Any) -> str:
    """A job's next run in this machine's time, and how far off: ``2026-03-02 09:00 (in 3 h)``."""
    from vikingbot.cli.tables import local, until

    return f"{local(value)} ({until(value)})" if value is not None else "never"


def _print_jobs(jobs: list[CronJob]) -> None:
    from vikingbot.cli.tables import Col, ago, print_table, until
    from vikingbot.cron.schedule import describe
    from vikingbot.cron.types import status_of

    if not jobs:
        typer.echo("No cron jobs. Add one with `vikingbot cron add NAME --every 1h --prompt ...`.")
        return
    print_table(
        "Cron jobs",
        [Col("name", wrap=True), Col("schedule"), Col("status"), Col("next"), Col("target")],
        [
            [
                job.name,
                describe(job),
                status_of(job),
                until(job.next_run_at) if job.next_run_at else "-",
                job.target or "(default)",
            ]
            for job in jobs
        ],
        notes=[
            f"last run {ago(job.last_run_at)}: {job.last_outcome or '-'}"
            if job.last_run_at
            else None
            for job in jobs
        ],
    )
    for job in jobs:
        if job.last_error:
            typer.echo(f"{job.name}: {job.last_outcome}: {job.last_error}", err=True)


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: NameArg,
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="What the agent should do.")],
    every: Annotated[
        str | None, typer.Option("--every", help="Interval: 90s, 30m, 2h, 1d.")
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="One shot at an ISO time, e.g. 2026-03-01T09:00.")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="5-field cron expression, e.g. '0 9 * * 1-5'.")
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            help="IANA timezone for --cron and a plain --at time (default: the heartbeat's, "
            "bot.heartbeat.timezone, else this machine's).",
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option("--target", help="Where replies go (default: bot.heartbeat.target)."),
    ] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", help="Workspace folder name to run in.")
    ] = None,
    timeout: Annotated[
        str | None, typer.Option("--timeout", help="Longest a run may take, e.g. 10m.")
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Add a job: exactly one of --every, --at or --cron."""
    from vikingbot.errors import CronError
    from vikingbot.grammar import to_seconds

    given = [(k, v) for k, v in (("every", every), ("at", at), ("cron", cron)) if v is not None]
    if len(given) != 1:
        fail("give exactly one of --every, --at or --cron", code=2)
    kind, expr = given[0]
    timeout_s = None
    if timeout is not None:
        try:
            timeout_s = to_seconds(timeout)
        except ValueError as exc:
            fail(f"--timeout: {exc}", code=2)
    from vikingbot.config.zones import default_zone_name

    rt = _home(ctx)
    try:
        job = _jobs(rt).add(
            name,
            kind,
            expr,
            prompt,
            timezone=tz or default_zone_name(rt.config.bot.heartbeat.timezone),
            target=target,
            workspace=workspace,
            timeout_s=timeout_s,
        )
    except CronError as exc:
        fail(str(exc))
    finally:
        rt.close()
    if json:
        print_json(job.to_dict())
    else:
        typer.echo(f"Added {job.name}: first run {_when(job.next_run_at)}.")


@app.command("list")
def list_cmd(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List jobs with their next run and last outcome (invalid jobs included)."""
    from vikingbot.cron.schedule import problem

    rt = _home(ctx)
    try:
        jobs = _jobs(rt).list()
    finally:
        rt.close()
    # a job broken in the database shows as invalid here even before the gateway saw it
    from dataclasses import replace

    jobs = [
        replace(j, last_outcome="invalid", last_error=reason)
        if (reason := problem(j)) is not None
        else j
        for j in jobs
    ]
    if json:
        print_json({"jobs": [j.to_dict() for j in jobs]})
    else:
        _print_jobs(jobs)


@app.command("remove")
def remove_cmd(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Delete a job."""
    from vikingbot.errors import CronError

    rt = _home(ctx)
    try:
        job = _jobs(rt).remove(name)
    except CronError as exc:
        fail(str(exc))
    finally:
        rt.close()
    if json:
        print_json({"removed": job.to_dict()})
    else:
        typer.echo(f"Removed {name}.")


def _set_enabled(ctx: typer.Context, name: str, enabled: bool, json: bool) -> None:
    from vikingbot.errors import CronError

    rt = _home(ctx)
    try:
        job = _jobs(rt).set_enabled(name, enabled)
    except CronError as exc:
        fail(str(exc))
    finally:
        rt.close()
    if json:
        print_json(job.to_dict())
    elif enabled:
        typer.echo(f"Enabled {name}: next run {_when(job.next_run_at)}.")
    else:
        typer.echo(f"Disabled {name}.")


@app.command("enable")
def enable_cmd(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Enable a job (its next run is planned from now)."""
    _set_enabled(ctx, name, True, json)


@app.command("disable")
def disable_cmd(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Disable a job (kept, not run)."""
    _set_enabled(ctx, name, False, json)


@app.command("run")
def run_cmd(ctx: typer.Context, name: NameArg, json: JsonOpt = False) -> None:
    """Run a job once now through the configured agent, and deliver its reply."""
    from vikingbot.cli.remote import call, gateway_client, note_local

    client = gateway_client(ctx)
    if client is not None:
        from urllib.parse import quote

        data = call(client, "POST", f"/api/v1/cron/jobs/{quote(name, safe='')}/run")
        data["via"] = "gateway"
    else:
        note_local()
        data = {**_run_locally(ctx, name).to_dict(), "via": "local"}
    outcome, error, reply = data["outcome"], data.get("error"), data.get("reply")
    if json:
        print_json(data)
    else:
        typer.echo(f"{name}: {outcome} in {float(data.get('duration_s') or 0):.1f}s")
        if reply and outcome in ("delivered", "inboxed", "noop", "ok"):
            typer.echo(reply)
        if outcome == "inboxed":
            typer.echo(f"note: {error} (see `vikingbot inbox`)", err=True)
        elif error:
            typer.echo(f"error: {error}", err=True)
    if outcome in ("error", "timeout"):
        raise typer.Exit(1)


def _run_locally(ctx: typer.Context, name: str) -> CronRun:
    import asyncio

    from vikingbot.errors import VikingbotError
    from vikingbot.gateway import compose

    rt = _home(ctx)
    try:
        _jobs(rt).require(name)
        missing = rt.readiness().problem
        if missing:
            fail(f"cannot run {name!r}: {missing}")
        service = compose.cron(rt, None)

        async def once() -> CronRun:
            try:
                return await service.run_now(name)
            finally:
                await rt.aclose()  # the agent's connections, MCP servers, the store

        return asyncio.run(once())
    except VikingbotError as exc:
        fail(str(exc))
    finally:
        rt.close()
