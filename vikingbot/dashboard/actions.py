"""State-changing requests (POST, CSRF-checked by the guard), each through the same
service the CLI uses: config editing, the heartbeat service, the inbox, cron jobs."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any
from urllib.parse import quote

from loguru import logger
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from vikingbot.bus import Attachment
from vikingbot.bus.sent_files import SentFile
from vikingbot.dashboard import editor, pages
from vikingbot.dashboard.app import PREFIX, Dashboard
from vikingbot.dashboard.guard import FORM_STATE
from vikingbot.errors import VikingbotError


def back(dash: Dashboard, path: str) -> Response:
    return RedirectResponse(PREFIX + path, status_code=303)


async def heartbeat_switch(dash: Dashboard, request: Request) -> Response:
    """The same effect as `vikingbot config set bot.heartbeat.enabled true|false`."""
    enabled = (await dash.form(request)).get("enabled") == "1"
    try:
        await dash.parts.ops.heartbeat_set_enabled(enabled)
    except VikingbotError as exc:
        return PlainTextResponse(f"not changed: {exc}", status_code=400)
    audit = partial(dash.parts.store.audit, details={"enabled": enabled})
    await asyncio.to_thread(audit, "dashboard", "heartbeat.switch", "bot.heartbeat.enabled", "ok")
    await dash.parts.apply_config()  # the page after the redirect shows the new state
    return back(dash, "/")


def _workspace(dash: Dashboard, request: Request) -> str | None:
    name = str(request.path_params["name"])
    return name if pages.valid_workspace(dash, name) else None


async def save(dash: Dashboard, request: Request) -> Response:
    name = _workspace(dash, request)
    if name is None:
        return PlainTextResponse("no such workspace", status_code=404)
    form = await dash.form(request)
    path = dash.parts.workspace_root / name / "HEARTBEAT.md"
    base = form.get("base", "")
    overwrite = form.get("overwrite") == "1"  # the explicit "overwrite theirs" after a conflict
    try:
        result = await asyncio.to_thread(
            partial(editor.save, overwrite=overwrite),
            path,
            form.get("theirs", "") if overwrite else base,
            form.get("text", ""),
        )
    except VikingbotError as exc:
        return PlainTextResponse(f"not saved: {exc}", status_code=409)
    if result.status in ("saved", "merged"):
        dash.parts.heartbeat.wake()
    data = await asyncio.to_thread(pages.workspace_data, dash, name)
    if result.status in ("conflict", "too-big"):
        data["text"] = result.mine  # the user's text stays in the editor
        data["problems"] = editor.problems(result.mine)
        data["base_text"] = base  # a plain Save conflicts again; only "overwrite theirs" wins
    return dash.page(request, "workspace.html", "workspaces", saved=result, **data)


async def check(dash: Dashboard, request: Request) -> Response:
    text = editor.normalise((await dash.form(request)).get("text", ""))
    found = await asyncio.to_thread(editor.problems, text)
    return dash.fragment("_problems.html", problems=found)


async def run_now(dash: Dashboard, request: Request) -> Response:
    name = _workspace(dash, request)
    if name is None:
        return PlainTextResponse("no such workspace", status_code=404)
    entry = (await dash.form(request)).get("entry") or None  # one entry's button

    async def go() -> None:
        try:
            await dash.parts.ops.heartbeat_run_now(workspace=name, force=True, entry=entry)
        except Exception:
            logger.exception("dashboard run-now of {} failed", name)

    dash.spawn(go(), f"run-now:{name}")
    return back(dash, f"/w/{quote(name, safe='')}")


async def pause(dash: Dashboard, request: Request) -> Response:
    name = _workspace(dash, request)
    if name is None:
        return PlainTextResponse("no such workspace", status_code=404)
    resume = request.url.path.endswith("/resume")
    ops = dash.parts.ops
    await (ops.heartbeat_resume(name) if resume else ops.heartbeat_pause(name))
    action = "heartbeat.resume" if resume else "heartbeat.pause"
    await asyncio.to_thread(dash.parts.store.audit, "dashboard", action, name, "ok")
    return back(dash, f"/w/{quote(name, safe='')}")


async def unpark(dash: Dashboard, request: Request) -> Response:
    """Take the parked mark off an entry and give it fresh retry counters."""
    from vikingbot.dashboard import queries
    from vikingbot.heartbeat.rewrite import Unpark, apply_moves
    from vikingbot.heartbeat.state import EntryState

    name = _workspace(dash, request)
    if name is None:
        return PlainTextResponse("no such workspace", status_code=404)
    key = (await dash.form(request)).get("entry", "")

    def go() -> None:
        apply_moves(dash.parts.workspace_root / name / "HEARTBEAT.md", [Unpark(key)])
        row = queries.entry_states(dash.parts.store, name).get(key)
        if row is not None:
            st = EntryState(**row)
            st.parked_reason = st.parked_text_hash = None
            st.retries = st.continuations = 0
            st.continue_next = False
            dash.parts.heartbeat.state.save_entry(st)
        dash.parts.store.audit("dashboard", "heartbeat.unpark", f"{name}: {key}"[:500], "ok")

    try:
        await asyncio.to_thread(go)
    except VikingbotError as exc:
        return PlainTextResponse(f"not unparked: {exc}", status_code=409)
    dash.parts.heartbeat.wake()
    return back(dash, f"/w/{quote(name, safe='')}")


async def mark_read(dash: Dashboard, request: Request) -> Response:
    form = await dash.form(request)
    ids = [int(x) for x in form.get("ids", "").split(",") if x.strip().isdigit()]
    await dash.parts.ops.inbox_mark_read(ids=ids or None, slot=None)
    if request.headers.get("hx-request"):  # one item's button: the refreshed list
        return await pages.inbox(dash, request)
    return back(dash, "/inbox")


async def chat_send(dash: Dashboard, request: Request) -> Response:
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.session.types import SessionKey

    slot = str(request.path_params["slot"])
    if not pages.valid_slot(slot):
        return PlainTextResponse("bad slot name", status_code=400)
    form = request.scope.get("state", {}).get(FORM_STATE)  # multipart: parsed by the guard
    if form is None:
        text = (await dash.form(request)).get("text", "").strip()
        files: tuple[Attachment, ...] = ()
    else:
        text = str(form.get("text") or "").strip()
        files = await uploads(form, dash.parts.config().bot.media.max_file_bytes)
    if not text and not files:
        return back(dash, f"/chat/{slot}")
    key = SessionKey(pages.CHAT_CHANNEL, "default", slot)
    box = Inbox(dash.parts.store, dash.parts.clock)

    async def tell(line: str) -> None:  # shown in the slot, read at once (no bell)
        item = await asyncio.to_thread(partial(box.add, slot, line, source=f"media:{slot}"))
        await asyncio.to_thread(box.mark_read, [item])

    async def turn() -> None:
        problem = dash.parts.agent_problem()
        prompt, meta = text, {"actor": "dashboard"}
        if files and not problem:
            if dash.parts.take_files is None:
                await tell("Files are not taken in here; only your words reached the agent.")
            else:
                prompt, more, notices = await dash.parts.take_files(key, text, files)
                meta = {**meta, **more}
                for line in notices:
                    await tell(line)
                if not prompt.strip():  # every file refused and no words: no turn
                    return
        if problem:
            reply = f"(not run: {problem})"
        else:
            try:
                result = await dash.parts.run_turn(prompt, key, meta)
                failed = getattr(result, "ended", "") == "error"
                reply = f"(failed: {result.error})" if failed else (result.text or "")
            except VikingbotError as exc:
                reply = f"(failed: {exc})"
        # the reply is in the session's history; an inbox row (read at once) tells open
        # pages that the slot changed, without ringing the bell for the user's own chat
        item = await asyncio.to_thread(partial(box.add, slot, reply, source=f"chat:{slot}"))
        await asyncio.to_thread(box.mark_read, [item])

    await asyncio.to_thread(dash.parts.sessions.get_or_create, key)
    dash.spawn(turn(), f"chat:{slot}")
    return back(dash, f"/chat/{slot}")


async def uploads(form: FormData, cap: int) -> tuple[Attachment, ...]:
    """The chat form's files as attachments: each read up to one byte past ``cap`` (one
    whose declared size is over it is not read at all: the intake refuses it)."""
    out: list[Attachment] = []
    for part in form.getlist("files"):
        if not isinstance(part, UploadFile) or not part.filename:
            continue  # an empty file input sends a part with no name
        if part.size is not None and part.size > cap:
            out.append(Attachment(part.filename, _unread, size=part.size))
            continue
        data = await part.read(cap + 1)
        out.append(SentFile(part.filename, data, part.content_type).attachment())
    return tuple(out)


async def _unread(limit: int) -> bytes:
    raise ValueError("not read: over the size limit")


async def cron_add(dash: Dashboard, request: Request) -> Response:
    from vikingbot.config.zones import default_zone_name
    from vikingbot.cron.jobs import CronJobs

    f = await dash.form(request)
    jobs = CronJobs(dash.parts.store, dash.parts.clock)
    try:
        await asyncio.to_thread(
            partial(
                jobs.add,
                f.get("name", "").strip(),
                f.get("kind", "every"),
                f.get("expr", "").strip(),
                f.get("prompt", ""),
                timezone=f.get("timezone", "").strip()
                or default_zone_name(dash.parts.config().bot.heartbeat.timezone),
                target=f.get("target", "").strip() or None,
            )
        )
    except VikingbotError as exc:
        return await _cron_error(dash, request, str(exc))
    return back(dash, "/cron")


async def _cron_error(dash: Dashboard, request: Request, error: str) -> Response:
    rows = await asyncio.to_thread(_cron_rows, dash)
    response = dash.page(request, "cron.html", "cron", jobs=rows, error=error)
    response.status_code = 400
    return response


def _cron_rows(dash: Dashboard) -> list[dict[str, Any]]:
    from vikingbot.cron.jobs import CronJobs

    return [j.to_dict() for j in CronJobs(dash.parts.store, dash.parts.clock).list()]


async def cron_remove(dash: Dashboard, request: Request) -> Response:
    from vikingbot.cron.jobs import CronJobs

    try:
        await asyncio.to_thread(
            CronJobs(dash.parts.store, dash.parts.clock).remove, request.path_params["name"]
        )
    except VikingbotError as exc:
        return await _cron_error(dash, request, str(exc))
    return back(dash, "/cron")


async def cron_run(dash: Dashboard, request: Request) -> Response:
    name = str(request.path_params["name"])

    async def go() -> None:
        try:
            await dash.parts.ops.cron_run(name)
        except VikingbotError as exc:
            logger.warning("dashboard: cron run {} refused: {}", name, exc)

    dash.spawn(go(), f"cron:{name}")
    return back(dash, "/cron")


def routes(dash: Dashboard) -> list[BaseRoute]:
    def bind(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            return await fn(dash, request)

        return endpoint

    post = ["POST"]
    return [
        Route("/heartbeat", bind(heartbeat_switch), methods=post),
        Route("/w/{name}/save", bind(save), methods=post),
        Route("/w/{name}/check", bind(check), methods=post),
        Route("/w/{name}/run", bind(run_now), methods=post),
        Route("/w/{name}/pause", bind(pause), methods=post),
        Route("/w/{name}/resume", bind(pause), methods=post),
        Route("/w/{name}/unpark", bind(unpark), methods=post),
        Route("/inbox/read", bind(mark_read), methods=post),
        Route("/chat/{slot}", bind(chat_send), methods=post),
        Route("/cron/add", bind(cron_add), methods=post),
        Route("/cron/{name}/remove", bind(cron_remove), methods=post),
        Route("/cron/{name}/run", bind(cron_run), methods=post),
    ]
