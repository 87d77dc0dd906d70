"""`vikingbot heartbeat plan | run-now | status | runs | check | enable | disable | pause | resume
| parked | unpark`.

The ``--json`` shapes are a contract scripts rely on (see docs/heartbeat.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json, state

if TYPE_CHECKING:
    from vikingbot.gateway.compose import Home
    from vikingbot.heartbeat.service import HeartbeatService

app = typer.Typer(no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
WorkspaceOpt = Annotated[str | None, typer.Option("--workspace", "-w", help="Only this workspace.")]


def _service(ctx: typer.Context) -> tuple[Home, HeartbeatService]:
    from vikingbot.gateway import compose
    from vikingbot.logs import quiet

    if not state(ctx).verbose:
        quiet()
    config, paths = get_config(ctx)
    home = compose.build_home(config, paths)
    return home, compose.heartbeat(home)


# Skips a user should look at (the rest are routine: stale, empty, not-due, ...).
ATTENTION = frozenset(
    {
        "unreadable",
        "invalid",
        "checker-missing",
        "paused",
        "budget",
        "parked",
        "busy",
        "pending",
        "provider-down",
        "disabled",
        "quiet-hours",
    }
)


@app.command("plan")
def plan_cmd(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="One row per decision, not the summary.")
    ] = False,
) -> None:
    """What a cycle would do right now, without calling a model.

    By default: counts by decision and reason, then only the rows that do
    something (runs) or need attention (paused, budget, parked, unreadable, ...).
    `--all` (or `--workspace`) prints every row; `--json` every row as JSON.
    Asks the running gateway when there is one (its view of the files is current).
    Exits 1 when any HEARTBEAT.md has errors (they are listed on stderr).
    """
    from vikingbot.cli.remote import call, gateway_client

    client = gateway_client(ctx)
    if client is not None:  # its index is warm: no file is read again
        from urllib.parse import quote

        query = f"?workspace={quote(workspace)}" if workspace else ""
        data = call(client, "GET", f"/api/v1/heartbeat/plan{query}")
    else:
        from vikingbot.gateway.ops import heartbeat_plan

        rt, svc = _service(ctx)
        data = heartbeat_plan(svc, workspace)
        rt.close()
    rows: list[dict[str, Any]] = data["decisions"]
    if as_json:
        print_json(rows)
    elif show_all or workspace is not None:
        _plan_table("Heartbeat plan", rows)
    else:
        _plan_summary(rows, data["workspaces"], len(data["problems"]))
    _print_problems(data["problems"])
    if data["problems"]:  # a HEARTBEAT.md with errors is something to fix (exit 1)
        raise typer.Exit(1)


def _plan_summary(decisions: list[dict[str, Any]], workspaces: int, problems: int) -> None:
    from collections import Counter

    counts = Counter((d["decision"], d["reason"]) for d in decisions)
    typer.echo(f"{_count(workspaces, 'workspace')}, {_count(len(decisions), 'decision')}")
    for (decision, reason), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        typer.echo(f"  {n:>7}  {decision:<4}  {reason}")
    shown = [d for d in decisions if d["decision"] == "run" or d["reason"] in ATTENTION]
    if shown:
        _plan_table("Runs and what needs attention", shown)
    elif not problems:
        typer.echo("nothing runs now and nothing needs attention")
    if problems:  # the headline counts them; the list follows
        typer.echo(
            f"{problems} problem{'s' if problems != 1 else ''} in HEARTBEAT.md files (below)"
        )
    hidden = len(decisions) - len(shown)
    if hidden:
        typer.echo(f"{hidden} routine skips not shown (vikingbot heartbeat plan --all)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _plan_table(title: str, decisions: list[dict[str, Any]]) -> None:
    from vikingbot.cli.tables import Col, print_table, until

    def detail(d: dict[str, Any]) -> str:
        text = d["detail"] or ""
        if d.get("model"):
            text = f"{text}, with {d['model']}" if text else f"with {d['model']}"
        if d["next_due"]:
            nxt = f"next {until(d['next_due'])}"
            text = f"{text}, {nxt}" if text else nxt
        return text

    print_table(
        title,
        [
            Col("workspace", merge=True),
            Col("session or entry", wrap=True),
            Col("decision"),
            Col("reason"),
            Col("detail", wrap=True),
        ],
        [
            [
                d["workspace"],
                d.get("name") or d["session"] or d["entry"] or "",
                d["decision"],
                d["reason"],
                detail(d),
            ]
            for d in decisions
        ],
    )


@app.command("run-now")
def run_now_cmd(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Run even when disabled or outside active hours.")
    ] = False,
    entry: Annotated[
        str | None,
        typer.Option(
            "--entry",
            "-e",
            help="Only this entry (its title or text), now, scheduled or not; "
            "its schedule does not move.",
        ),
    ] = None,
) -> None:
    """Run one cycle now and print each result (through the gateway when one runs)."""
    from vikingbot.cli.remote import call, gateway_client, note_local

    client = gateway_client(ctx)
    if client is not None:
        body = {"workspace": workspace, "force": force, "entry": entry}
        data = call(client, "POST", "/api/v1/heartbeat/run-now", body)
        results, problem, via = data["results"], data.get("agent_problem"), "gateway"
    else:
        import asyncio

        from vikingbot.gateway.ops import heartbeat_run_now

        note_local()
        rt, svc = _service(ctx)
        problem = rt.readiness().problem

        async def once() -> list[dict[str, Any]]:
            try:
                return await heartbeat_run_now(svc, workspace=workspace, force=force, entry=entry)
            finally:
                await rt.aclose()  # the model client's connections too, in this loop

        results = asyncio.run(once())
        via = "local"
    if as_json:
        print_json([{**r, "via": via} for r in results])
    else:
        _runs_table(f"Heartbeat run via {via}", results, when=False)
        if problem and any(r["decision"] == "run" for r in results):
            _stderr(f"note: {problem}")


@app.command("status")
def status_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Enabled, interval, next cycle; per workspace the last outcome, next due and pause."""
    from vikingbot.cli.remote import call, gateway_client

    client = gateway_client(ctx)
    if client is not None:
        data = {**call(client, "GET", "/api/v1/heartbeat/status"), "via": "gateway"}
    else:
        from vikingbot.gateway.ops import heartbeat_status

        rt, svc = _service(ctx)
        data = {**heartbeat_status(svc, rt.readiness().problem), "via": "local"}
        rt.close()
    if as_json:
        print_json(data)
        return
    from vikingbot.cli.tables import Col, ago, local, print_table, until

    on = "on" if data["enabled"] else "off (vikingbot heartbeat enable)"
    typer.echo(
        f"heartbeat: {on}, every {data['interval_seconds']}s, mode {data['mode']}, "
        f"target {data['target']}"
    )
    last = data["last_cycle_at"]
    nxt = data["next_cycle_at"]
    typer.echo(
        f"last cycle: {f'{local(last)} ({ago(last)})' if last else 'never'}   "
        f"next: {f'{local(nxt)} ({until(nxt)})' if nxt else '-'}"
    )
    if data["agent_problem"]:
        typer.echo(f"agent: {data['agent_problem']}")
    print_table(
        "Workspaces",
        [
            Col("workspace"),
            Col("paused", wrap=True),
            Col("last outcome"),
            Col("last run"),
            Col("now", wrap=True),
            Col("next due"),
        ],
        [
            [
                w["workspace"],
                w["paused_reason"] or ("yes" if w["paused"] else ""),
                w["last_outcome"] or "",
                ago(w["last_run_at"]) if w["last_run_at"] else "",
                ", ".join(w["now"] or []),
                until(w["next_due"]) if w["next_due"] else "",
            ]
            for w in data["workspaces"]
        ],
    )
    _print_problems(data["problems"])


@app.command("runs")
def runs_cmd(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many rows.")] = 20,
    workspace: WorkspaceOpt = None,
) -> None:
    """The run ledger, newest first: every run and every (folded) skip."""
    rt, svc = _service(ctx)
    rows = svc.state.runs(limit=limit, workspace=workspace)
    if as_json:
        print_json(rows)
    else:
        _runs_table("Heartbeat runs", rows, when=True)
    rt.close()


def _runs_table(title: str, rows: list[dict[str, Any]], *, when: bool) -> None:
    """Runs and skips: codes and counts in columns; a skip's detail (its schedule, the
    holder, ...) or a run's error in a note under its row."""
    from vikingbot.cli.tables import Col, ago, print_table
    from vikingbot.heartbeat.planner import ledger_name

    cols = [
        Col("at"),
        Col("workspace", merge=True),
        Col("session or entry", wrap=True),
        Col("reason"),
        Col("outcome"),
        Col("calls", right=True),
        Col("tokens", right=True),
    ]
    if not when:
        cols = cols[1:]
    print_table(
        title,
        cols,
        [
            ([ago(r["at"])] if when else [])
            + [
                r["workspace"],
                ledger_name(r),
                r["reason"],
                r["outcome"] or "",
                *_counts(r),
            ]
            for r in rows
        ],
        notes=[_note(r) for r in rows],
        empty="no runs yet",
    )


def _counts(r: dict[str, Any]) -> list[str]:
    """Model calls and tokens of a run; blank for a skip (it never calls a model)."""
    if r["decision"] != "run":
        return ["", ""]
    return [
        str(r["model_calls"]),
        str(int(r.get("tokens_in") or 0) + int(r.get("tokens_out") or 0)),
    ]


def _note(r: dict[str, Any]) -> str | None:
    """A run's error; a skip's detail (run-now's rows carry `plan`'s words, fix included;
    the ledger's rows the planner's own detail)."""
    if r["decision"] != "run":
        return r.get("detail") or r.get("error") or None
    text = r.get("error")
    return f"error: {text}" if text else None


@app.command("check")
def check_cmd(
    ctx: typer.Context,
    entry: Annotated[
        str, typer.Argument(help="The entry's title (scheduled entries with only-if).")
    ],
    as_json: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Run an entry's `only-if:` checker now; print has-work, signature and context."""
    import asyncio

    from vikingbot.heartbeat.checkers import run_check

    rt, svc = _service(ctx)
    inputs = svc.collect(workspace)
    found = None
    for wsin in inputs:
        parsed = wsin.parsed or svc.read_file(svc.workspace_path(wsin.name) / "HEARTBEAT.md")
        for e in parsed.entries:
            if e.key == entry or e.title == entry:
                found = (wsin.name, e)
                break
        if found:
            break
    if found is None:
        fail(f"no entry titled {entry!r} in any workspace's HEARTBEAT.md")
    name, e = found
    if not e.only_if:
        fail(f"entry {entry!r} in workspace {name} has no only-if: checker")
    result = asyncio.run(
        run_check(
            e.only_if[0],
            e.only_if[1],
            svc.cfg.checkers,
            state_dir=rt.paths.data_dir / "checkers",
            environ=rt.environ,
        )
    )
    data = {
        "workspace": name,
        "entry": e.key,
        "checker": e.only_if[0],
        "scope": e.only_if[1],
        "has_work": result.has_work,
        "signature": result.signature,
        "context": result.context,
        "error": result.error,
    }
    if as_json:
        print_json(data)
    else:
        for k, v in data.items():
            typer.echo(f"{k + ':':<11}{v}")
    rt.close()


def _set_enabled(ctx: typer.Context, value: bool) -> None:
    from vikingbot.cli.remote import call, gateway_client

    word = "enabled" if value else "disabled"
    client = gateway_client(ctx)
    if client is not None:
        data = call(client, "POST", f"/api/v1/heartbeat/{'enable' if value else 'disable'}")
        _stderr(f"heartbeat {word} ({data['config']}); the running gateway applied it")
        return
    from vikingbot.config.loader import config_path
    from vikingbot.errors import ConfigError
    from vikingbot.gateway.ops import set_heartbeat_enabled

    get_config(ctx)
    path = config_path(state(ctx).config_path)
    try:
        set_heartbeat_enabled(path, value)
    except ConfigError as exc:
        fail(str(exc))
    _stderr(f"heartbeat {word} ({path}); no gateway is running: it applies at the next start")


@app.command("enable")
def enable_cmd(ctx: typer.Context) -> None:
    """Turn the heartbeat on (edits the config file)."""
    _set_enabled(ctx, True)


@app.command("disable")
def disable_cmd(ctx: typer.Context) -> None:
    """Turn the heartbeat off (edits the config file)."""
    _set_enabled(ctx, False)


def _pause_or_resume(ctx: typer.Context, workspace: str, pause: bool) -> None:
    from vikingbot.cli.remote import call, gateway_client
    from vikingbot.gateway.ops import known_workspace

    word = "paused" if pause else "resumed"
    client = gateway_client(ctx)
    if client is not None:
        call(
            client,
            "POST",
            f"/api/v1/heartbeat/{'pause' if pause else 'resume'}",
            {"workspace": workspace},
        )
        _stderr(f"workspace {workspace} {word}")
        return
    rt, svc = _service(ctx)
    problem = known_workspace(rt.paths.workspace_root, workspace)
    if problem:
        rt.close()
        fail(problem)
    if pause:
        svc.pause(workspace)
    else:
        svc.resume(workspace)
    rt.close()
    _stderr(f"workspace {workspace} {word}")


@app.command("pause")
def pause_cmd(
    ctx: typer.Context, workspace: Annotated[str, typer.Argument(help="Workspace name.")]
) -> None:
    """Pause one workspace's heartbeat until `resume`."""
    _pause_or_resume(ctx, workspace, True)


@app.command("resume")
def resume_cmd(
    ctx: typer.Context, workspace: Annotated[str, typer.Argument(help="Workspace name.")]
) -> None:
    """Resume a paused workspace (also lifts a budget pause for today)."""
    _pause_or_resume(ctx, workspace, False)


@app.command("parked")
def parked_cmd(
    ctx: typer.Context, as_json: JsonOpt = False, workspace: WorkspaceOpt = None
) -> None:
    """List parked entries (failed or continued too often), with why."""
    rt, svc = _service(ctx)
    rows = svc.parked(workspace)
    rt.close()
    if as_json:
        print_json(rows)
        return
    if not rows:
        _stderr("no parked entries")
        return
    from vikingbot.cli.tables import Col, print_table

    print_table(
        "Parked heartbeat entries",
        [
            Col("workspace", merge=True),
            Col("entry", wrap=True),
            Col("line", right=True),
            Col("why parked", wrap=True),
        ],
        [[r["workspace"], r["entry"], str(r["line"]), r["reason"] or ""] for r in rows],
    )


@app.command("unpark")
def unpark_cmd(
    ctx: typer.Context,
    entry: Annotated[str, typer.Argument(help="The entry's title (scheduled) or its text.")],
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a parked entry again: removes its parked mark and resets its retries."""
    from vikingbot.errors import VikingbotError

    rt, svc = _service(ctx)
    try:
        done = svc.unpark(entry, workspace)
    except VikingbotError as exc:
        rt.close()
        fail(str(exc))
    rt.close()
    if as_json:
        print_json(done)
    else:
        _stderr(f"unparked {done['entry']!r} in workspace {done['workspace']} (was: {done['was']})")


def _stderr(text: str) -> None:
    from vikingbot.cli.common import err_console

    err_console().print(text, highlight=False, markup=False, soft_wrap=True)


def _print_problems(problems: list[dict[str, Any]]) -> None:
    for p in problems:
        where = f"{p['file']}:{p['line']}" if p["line"] else p["file"]
        _stderr(f"problem: {where}: {p['error']}")
