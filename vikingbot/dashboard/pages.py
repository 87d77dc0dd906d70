"""The dashboard's pages (GET): overview, workspaces, a workspace, runs, inbox, chat, cron, audit."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from vikingbot.dashboard import editor, queries
from vikingbot.dashboard.app import Dashboard
from vikingbot.dashboard.chart import calls_chart
from vikingbot.errors import WorkspaceError
from vikingbot.memory import versions
from vikingbot.skills.discover import catalog

CHAT_CHANNEL = "dashboard"


def _int(value: str | None, default: int = 1) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default


def valid_workspace(dash: Dashboard, name: str) -> bool:
    if not name or "/" in name or "\\" in name or name.startswith(".") or len(name) > 300:
        return False
    folder = dash.parts.workspace_root / name
    return folder.is_dir() and not folder.is_symlink()  # the heartbeat refuses a symlink too


def valid_slot(slot: str) -> bool:
    return 0 < len(slot) <= 100 and all(c.isalnum() or c in "-_." for c in slot)


def readiness(dash: Dashboard) -> str:
    problem = dash.parts.agent_problem()
    if problem:
        return f"Not ready: {problem}"
    agents = dash.parts.config().bot.agents
    return f"Ready: the {agents.loop} loop answers with {agents.provider} / {agents.model}."


def overview_data(dash: Dashboard) -> dict[str, Any]:
    svc = dash.parts.heartbeat
    cfg = svc.cfg
    tz = svc.tz()
    now = svc.now()
    g = svc.state.workspace("*")
    next_cycle = (
        g.last_cycle_at + timedelta(seconds=cfg.interval_seconds) if g.last_cycle_at else None
    )
    days = queries.usage_by_day(dash.parts.store, now.astimezone(tz).date(), tz)
    return {
        "health": dash.parts.health(),
        "readiness": readiness(dash),
        "hb": cfg,
        "last_cycle_at": g.last_cycle_at,
        "next_cycle_at": next_cycle if cfg.enabled else None,
        "cycle": queries.last_cycle(dash.parts.store),
        "today": days[-1],
        "budget": cfg.budget,
        "chart": Markup(calls_chart([(d.day, d.calls) for d in days])),
    }


async def overview(dash: Dashboard, request: Request) -> Response:
    data = await asyncio.to_thread(overview_data, dash)
    return dash.page(request, "overview.html", "overview", **data)


async def workspaces(dash: Dashboard, request: Request) -> Response:
    q = request.query_params.get("q", "")[:200]
    state = request.query_params.get("state", "")
    state = state if state in queries.WS_STATES else ""
    page_no = _int(request.query_params.get("page"))

    def load() -> queries.Page:
        names = queries.workspace_names(dash.parts.workspace_root)
        states = dash.parts.heartbeat.state.all_workspaces()
        parked = queries.parked_workspaces(dash.parts.store)
        page = queries.workspace_rows(names, states, parked, q, state, page_no)
        due = next_due_entries(dash, [name for name, _ in page.rows])
        page.rows = [(name, ws, due.get(name), name in parked) for name, ws in page.rows]
        return page

    page = await asyncio.to_thread(load)
    ctx: dict[str, Any] = {"page": page, "q": q, "state": state, "states": queries.WS_STATES}
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "ws-table":
        return dash.fragment("_ws_table.html", **ctx)
    return dash.page(request, "workspaces.html", "workspaces", **ctx)


def next_due_entries(dash: Dashboard, names: list[str]) -> dict[str, tuple[str, Any]]:
    """Per workspace of one page: its scheduled entry due soonest, (title, when)."""
    from vikingbot.heartbeat.schedule import next_due

    svc = dash.parts.heartbeat
    tz = svc.tz()
    states = queries.entry_states_for(dash.parts.store, names)
    out: dict[str, tuple[str, Any]] = {}
    for name in names:
        parsed = svc.read_file(dash.parts.workspace_root / name / "HEARTBEAT.md")
        best: tuple[str, Any] | None = None
        for e in parsed.scheduled:
            st = states.get((name, e.key))
            if e.schedule is None or st is None:
                continue  # not seen by a cycle yet: its rhythm starts when it is
            try:
                when = next_due(e.schedule, st["first_seen"], st["last_fired"], tz)
            except ValueError:
                continue
            if best is None or when < best[1]:
                best = (e.key, when)
        if best is not None:
            out[name] = best
    return out


def workspace_data(dash: Dashboard, name: str) -> dict[str, Any]:
    svc = dash.parts.heartbeat
    path = dash.parts.workspace_root / name / "HEARTBEAT.md"
    try:
        text, refused = editor.load(path), None
    except WorkspaceError as exc:
        text, refused = "", str(exc)
    parsed = svc.read_file(path)
    decisions, _ = svc.plan("scheduled", workspace=name)
    by_entry = {d.entry: d for d in decisions if d.entry}
    states = queries.entry_states(dash.parts.store, name)
    entries = []
    for e in parsed.entries:
        if not e.is_work:
            continue
        st = states.get(e.key, {})
        d = by_entry.get(e.key)
        entries.append(
            {
                "key": e.key,
                "line": e.line,
                "text": e.title or e.text,
                "schedule": e.schedule.describe() if e.schedule else "every cycle",
                "next_fire": d.next_due if d and d.next_due else None,
                "decision": f"{d.decision} ({d.reason})" if d else "",
                "last_outcome": st.get("last_outcome"),
                "last_fired": st.get("last_fired"),
                "signature": "has a stored signature" if st.get("signature") else "none",
                "parked": st.get("parked_reason") or e.parked,
                "error": e.error,
            }
        )
    ws = svc.state.all_workspaces().get(name)
    ws_decisions = [d for d in decisions if not d.entry]
    skills = catalog(workspace=dash.parts.workspace_root / name, user=dash.parts.user_skills)
    return {
        "name": name,
        "text": text,
        "problems": editor.problems(text),
        "refused": refused,
        "entries": entries,
        "ws": ws,
        "now": ws_decisions[-1] if ws_decisions else None,
        "runs": queries.runs(dash.parts.store, {"workspace": name}, 1, svc.tz()).rows[:10],
        "skills": skills.skills,
        "skill_problems": skills.problems,
        "memory": memory_rows(dash.parts.workspace_root / name),
    }


def memory_rows(workspace: Path, limit: int = 10) -> list[dict[str, Any]]:
    """The newest memory changes of a workspace (``memory.versions``), for its page."""
    return [
        {
            "id": v.id,
            "at": v.at,
            "reason": v.reason,
            "stat": v.stat(),
            "files": sorted(v.files),
            "diff": v.diff(),
        }
        for v in versions.log(workspace)[:limit]
    ]


async def workspace(dash: Dashboard, request: Request) -> Response:
    name = request.path_params["name"]
    if not valid_workspace(dash, name):
        return PlainTextResponse(f"no workspace {name!r}", status_code=404)
    data = await asyncio.to_thread(workspace_data, dash, name)
    return dash.page(request, "workspace.html", "workspaces", saved=None, **data)


async def runs(dash: Dashboard, request: Request) -> Response:
    filters = {k: request.query_params.get(k, "")[:300] for k in (*queries.RUN_FILTERS, "date")}
    page_no = _int(request.query_params.get("page"))
    tz = dash.parts.heartbeat.tz()

    def load() -> dict[str, Any]:
        store = dash.parts.store
        return {
            "page": queries.runs(store, filters, page_no, tz),
            "options": {
                k: queries.distinct_values(store, k) for k in ("decision", "reason", "outcome")
            },
        }

    data = await asyncio.to_thread(load)
    qs = urlencode({k: v for k, v in filters.items() if v}) + "&"
    return dash.page(request, "runs.html", "runs", filters=filters, qs=qs, **data)


async def inbox(dash: Dashboard, request: Request) -> Response:
    show_all = request.query_params.get("all") == "1"
    seen = dash.bell.last
    items = await asyncio.to_thread(queries.inbox_items, dash.parts.store, unread_only=not show_all)
    if request.headers.get("hx-request"):
        return dash.fragment("_inbox_list.html", items=items, show_all=show_all)
    return dash.page(request, "inbox.html", "inbox", seen=seen, items=items, show_all=show_all)


def chat_log(dash: Dashboard, slot: str) -> list[dict[str, Any]]:
    from vikingbot.session.types import SessionKey

    key = SessionKey(CHAT_CHANNEL, "default", slot)
    log: list[dict[str, Any]] = []
    if dash.parts.sessions.get_meta(key) is not None:
        for m in dash.parts.sessions.read_messages(key, limit=200):
            if m.role in ("user", "assistant") and (m.content or "").strip():
                log.append({"at": m.timestamp, "who": m.role, "text": m.content, "kind": "chat"})
    for item in queries.inbox_items(dash.parts.store, unread_only=False, slot=slot, limit=100):
        if item["source"] and str(item["source"]).startswith("chat:"):
            continue  # a chat reply: already in the session's history
        who = "prompt" if item["kind"] == "prompt" else "result"
        log.append({"at": item["created_at"], "who": who, "text": item["text"], "kind": who})
    log.sort(key=lambda x: x["at"])
    return log[-200:]


async def chat(dash: Dashboard, request: Request) -> Response:
    slot = request.path_params.get("slot", "default")
    if not valid_slot(slot):
        return PlainTextResponse("a slot name is letters, digits, - _ .", status_code=400)
    seen = dash.bell.last
    log = await asyncio.to_thread(chat_log, dash, slot)
    if request.headers.get("hx-request"):
        return dash.fragment("_chat_log.html", log=log)
    slots = await asyncio.to_thread(queries.slots, dash.parts.store)
    return dash.page(request, "chat.html", "chat", seen=seen, slot=slot, slots=slots, log=log)


async def cron(dash: Dashboard, request: Request) -> Response:
    from vikingbot.cron.jobs import CronJobs

    jobs = await asyncio.to_thread(CronJobs(dash.parts.store, dash.parts.clock).list)
    rows = [j.to_dict() for j in jobs]
    return dash.page(request, "cron.html", "cron", jobs=rows, error=None)


async def audit(dash: Dashboard, request: Request) -> Response:
    action = request.query_params.get("action", "")[:100]
    page_no = _int(request.query_params.get("page"))
    page, actions = await asyncio.to_thread(queries.audit, dash.parts.store, action, page_no)
    return dash.page(request, "audit.html", "audit", page=page, action=action, actions=actions)


def routes(dash: Dashboard) -> list[BaseRoute]:
    def bind(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            return await fn(dash, request)

        return endpoint

    return [
        Route("/", bind(overview)),
        Route("/workspaces", bind(workspaces)),
        Route("/w/{name}", bind(workspace)),
        Route("/runs", bind(runs)),
        Route("/inbox", bind(inbox)),
        Route("/chat/{slot}", bind(chat)),
        Route("/cron", bind(cron)),
        Route("/audit", bind(audit)),
    ]
