"""What a person does in the dashboard, in a real Chromium against a real gateway.

The tests of this module share one gateway (see conftest.py); each uses its own
workspace, and the run-now test counts the bell relative to where it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from playwright.sync_api import expect

from tests.support.gateway_proc import GatewayProcess
from tests.support.home import Home, login_url, poll, with_tasks
from vikingbot.testing.fake_openai import reply

# the module's gateway has a token, as one bound beyond loopback must
TOKEN = "a-long-gateway-token-for-the-test"
BOT = {
    "gateway": {"token": TOKEN},
    "tools": {"auto_approve": ["message"]},
    "agents": {"vision": "on"},  # the fake model sees the chat form's pictures
}
HOSTILE = (
    "Done. <script>window.__pwned = 1</script>\n\n"
    '<img src="x" onerror="window.__pwned = 2"> [click](javascript:window.__pwned=3)'
)


def test_switching_the_heartbeat_on_and_off_edits_the_config_and_the_gateway_follows(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    expect(page.locator("#hb-state")).to_have_text("off")
    page.click("#hb-toggle")
    expect(page.locator("#hb-state")).to_have_text("on")
    assert gw.get("/health")["heartbeat"]["enabled"] is True
    page.click("#hb-toggle")
    expect(page.locator("#hb-state")).to_have_text("off")
    config = json.loads((home.path / "config.json").read_text())
    assert config["bot"]["heartbeat"]["enabled"] is False
    assert config["bot"]["owner"] == home.config["bot"]["owner"]  # the rest is kept
    assert gw.get("/health")["heartbeat"]["enabled"] is False


def test_a_save_over_a_file_another_process_appended_to_keeps_both(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    path = home.write_heartbeat(with_tasks("- Water the plants", "- Check the invoices"), "edit")
    page.goto(gw.base_url + "/ui/w/edit")
    box = page.locator("#heartbeat-text")
    box.fill(box.input_value().replace("- Water the plants", "- Water the plants and herbs"))
    # meanwhile, another process appends a line
    appended = "- Renew the TLS certificate"
    code = f"open({str(path)!r}, 'a').write({appended + chr(10)!r})"
    subprocess.run([sys.executable, "-c", code], check=True)
    page.click("#save")
    expect(page.locator("#save-status")).to_contain_text("both your edit and the other change")
    saved = path.read_text()
    assert "- Water the plants and herbs\n" in saved
    assert appended in saved
    assert "- Check the invoices" in saved
    assert appended in page.locator("#heartbeat-text").input_value()  # the editor shows it


def test_a_conflicting_save_is_refused_and_shows_both_versions(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    path = home.write_heartbeat(with_tasks("- Water the plants"), "clash")
    page.goto(gw.base_url + "/ui/w/clash")
    box = page.locator("#heartbeat-text")
    box.fill(box.input_value().replace("- Water the plants", "- Water the roses"))
    path.write_text(path.read_text().replace("- Water the plants", "- Water the cactus"))
    page.click("#save")
    expect(page.locator("#save-status")).to_contain_text("Not saved")
    expect(page.locator("#save-status pre.file")).to_contain_text("- Water the cactus")
    assert "- Water the roses" in page.locator("#heartbeat-text").input_value()
    assert "- Water the cactus" in path.read_text()  # the other writer's text is untouched
    expect(page.locator("#save-status pre.mine")).to_contain_text("- Water the roses")
    page.click("#save")  # a plain Save again does not overwrite the other edit
    expect(page.locator("#save-status")).to_contain_text("Not saved")
    assert "- Water the cactus" in path.read_text()
    page.click("#overwrite")  # only the explicit choice does
    expect(page.locator("#save-status")).to_have_text("Saved.")
    assert "- Water the roses" in path.read_text() and "cactus" not in path.read_text()


def test_an_unchanged_save_writes_nothing(home: Home, gw: GatewayProcess, page: Any) -> None:
    """A file that begins with a blank line and mixes line endings (what a browser's textarea
    changes on the way: the first newline dropped, every line ending sent as CRLF)."""
    path = home.write_heartbeat("", "untouched")
    raw = b"\n## Active Tasks\r\n\n- Water the plants\r- Check the mail\n"
    path.write_bytes(raw)
    before = path.stat()
    page.goto(gw.base_url + "/ui/w/untouched")
    page.click("#save")
    expect(page.locator("#save-status")).to_contain_text("Nothing to save")
    after = path.stat()
    assert path.read_bytes() == raw
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_symlinked_heartbeat_file_is_neither_shown_nor_saved(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    path = home.write_heartbeat(with_tasks("- Water the plants"), "linked")
    secret = path.parent / "config-copy.json"
    secret.write_text('{"apiKey": "sk-not-for-the-page"}')
    path.unlink()
    path.symlink_to(secret)
    page.goto(gw.base_url + "/ui/w/linked")
    expect(page.locator("#refused")).to_contain_text("symbolic link")
    assert "sk-not-for-the-page" not in page.content()
    assert page.locator("#heartbeat-text").count() == 0
    outside = home.workspace("linked").parent / "elsewhere"
    outside.mkdir()
    (outside / "HEARTBEAT.md").write_text(with_tasks("- Secret task"))
    (outside.parent / "alias").symlink_to(outside)
    assert urllib_status(gw.base_url + "/ui/w/alias", page) == 404


def test_parse_errors_are_shown_on_their_lines_while_typing(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    home.write_heartbeat(with_tasks("- Fine entry"), "typos")
    page.goto(gw.base_url + "/ui/w/typos")
    expect(page.locator("#problems")).to_contain_text("No problems")
    box = page.locator("#heartbeat-text")
    lines = box.input_value().split("\n")
    at = lines.index("- Fine entry")
    lines.insert(at + 1, "- every: banana title: Backup task: Check the backup")
    box.fill("\n".join(lines))
    expect(page.locator("#problems")).to_contain_text(f"line {at + 2}: ")
    expect(page.locator("#problems")).to_contain_text("got 'banana'")


def test_run_now_result_arrives_in_the_inbox_and_the_bell_rises_without_reload(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Check whether the nightly build is green"))
    home.llm.script([reply("The nightly build is red since 02:10.")])
    page.goto(gw.base_url + "/ui/inbox")
    expect(page.locator("#bell-count")).not_to_have_text("…")
    before = int(page.locator("#bell-count").inner_text())
    page.evaluate("window.__marker = 'same page'")
    other = page.context.new_page()
    other.goto(gw.base_url + "/ui/w/shared")
    other.click("#run-now")
    expect(page.locator("#bell-count")).to_have_text(str(before + 1), timeout=30_000)
    expect(page.locator("#inbox-list")).to_contain_text("The nightly build is red since 02:10.")
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    item = page.locator("#inbox-list article", has_text="The nightly build is red")
    item.locator(".mark-read").click()  # this one item
    expect(page.locator("#bell-count")).to_have_text(str(before))
    expect(page.locator("#inbox-list")).not_to_contain_text("The nightly build is red")
    page.click("#mark-all-read")
    expect(page.locator("#bell-count")).to_have_text("0")


def test_run_now_pressed_twice_runs_the_checklist_once(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    """Issue 31: the button pressed again while the first run is in its model call
    finds that run's claim: the second is a `busy` skip in the ledger, and the model
    is asked once."""
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Check the printer's toner"))
    # the reply is held until the second press is settled (release() ends the hold,
    # and any later one of this module's model: none uses a delay)
    home.llm.script([reply("The toner is at 5 %.", delay_s=120.0)])
    asked = len(home.llm.requests)
    before = max((r["id"] for r in home.ledger()), default=0)
    page.goto(gw.base_url + "/ui/w/shared")
    page.click("#run-now")
    poll(lambda: len(home.llm.requests) > asked, "the first run's model call")
    page.goto(gw.base_url + "/ui/w/shared")
    page.click("#run-now")

    def rows(decision: str) -> list[dict[str, Any]]:
        return [r for r in home.ledger() if r["id"] > before and r["decision"] == decision]

    busy = poll(lambda: [r for r in rows("skip") if r["reason"] == "busy"], "a busy skip")
    assert [(r["trigger"], r["workspace"]) for r in busy] == [("manual", "shared")]
    home.llm.release()
    ran = poll(lambda: [r for r in rows("run") if r["outcome"]], "the first run's outcome")
    assert len(ran) == 1 and len(home.llm.requests) == asked + 1


def test_a_run_of_the_checklist_is_named_checklist_as_in_the_cli(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    """The workspace's unscheduled entries run as one: its row in the runs tables
    (the runs page and the workspace page) is "checklist", not an empty cell."""
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Look at the weather for the weekend"))
    home.llm.script([reply("Rain on Saturday.")])
    before = max((r["id"] for r in home.ledger()), default=0)
    page.goto(gw.base_url + "/ui/w/shared")
    page.click("#run-now")

    def ran() -> list[dict[str, Any]]:
        return [r for r in home.ledger() if r["id"] > before and r["decision"] == "run"]

    row = poll(lambda: [r for r in ran() if r["outcome"]], "the checklist's run")[0]
    assert (row["entry"], row["session"]) == (None, None)  # a checklist run names neither
    cli = home.cli("heartbeat", "runs", "--workspace", "shared")
    assert cli.returncode == 0 and "checklist" in cli.stdout, cli
    for url in ("/ui/runs?workspace=shared&decision=run", "/ui/w/shared"):
        page.goto(gw.base_url + url)
        table = page.locator("table.list", has=page.locator("th", has_text="session or entry"))
        cells = table.locator("tbody tr").first.locator("td")
        expect(cells.nth(1)).to_have_text("shared")
        expect(cells.nth(2)).to_have_text("checklist")


def test_a_hostile_model_reply_is_shown_as_text_and_never_runs(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    home.llm.script([reply(HOSTILE)])
    page.goto(gw.base_url + "/ui/chat/hostile")
    page.fill("textarea[name=text]", "status?")
    page.click(".chat-form button")
    log = page.locator("#chat-log")
    expect(log).to_contain_text("window.__pwned = 1", timeout=30_000)
    assert log.locator("script, img, a[href^='javascript']").count() == 0
    assert page.evaluate("window.__pwned") is None
    # the same text as an inbox item (a delivered result) is inert there too
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.store.db import StateStore

    store = StateStore.open(home.database_url)
    try:
        Inbox(store).add("hostile", HOSTILE, source="heartbeat:shared")
    finally:
        store.close()
    page.goto(gw.base_url + "/ui/inbox")
    expect(page.locator("#inbox-list")).to_contain_text("window.__pwned = 1")
    assert page.locator("#inbox-list").locator("script, img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_request_without_the_csrf_token_is_refused(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    before = (home.path / "config.json").read_text()
    # the same browser with its session cookie, but no token: refused
    response = page.request.post(gw.base_url + "/ui/heartbeat", form={"enabled": "1"})
    assert response.status == 403
    assert "CSRF" in response.text()
    wrong = page.request.post(gw.base_url + "/ui/heartbeat", form={"enabled": "1", "csrf": "x"})
    assert wrong.status == 403
    assert (home.path / "config.json").read_text() == before
    assert gw.get("/health")["heartbeat"]["enabled"] is False
    # and nothing is readable without a session at all
    anonymous = page.context.browser.new_context()
    try:
        answer = anonymous.request.get(gw.base_url + "/ui/inbox", max_redirects=0)
        assert answer.status == 303
        assert answer.headers["location"].endswith("/ui/login")
    finally:
        anonymous.close()


def test_pages_send_a_strict_content_security_policy_and_a_strict_cookie(
    gw: GatewayProcess, page: Any
) -> None:
    for path in ("/ui/", "/ui/workspaces", "/ui/runs", "/ui/inbox", "/ui/cron", "/ui/audit"):
        response = page.goto(gw.base_url + path)
        assert response is not None and response.status == 200, path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    (session,) = [c for c in page.context.cookies() if c["name"] == "vb_session"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"


def test_a_login_link_works_once_and_a_wrong_token_gets_the_login_form(
    home: Home, gw: GatewayProcess, browser: Any
) -> None:

    url = login_url(home)
    assert url.startswith(gw.base_url + "/ui/login?token=")
    first = browser.new_context()
    second = browser.new_context()
    try:
        page = first.new_page()
        page.goto(url)
        expect(page.locator("h1")).to_have_text("Overview")
        again = second.new_page()
        response = again.goto(url)
        assert response is not None and response.status == 401
        expect(again.locator(".error")).to_contain_text("not valid")
        again.goto(gw.base_url + "/")  # the root sends a browser to the login form
        expect(again.locator("input[name=token]")).to_be_visible()
    finally:
        first.close()
        second.close()


def test_nothing_is_readable_without_a_session_and_the_gateway_token_logs_in(
    home: Home, gw: GatewayProcess, browser: Any
) -> None:
    for path in ("/ui/", "/ui/inbox", "/ui/events", "/ui/runs?workspace=x"):
        req = urllib.request.Request(gw.base_url + path, headers={"hx-request": "true"})
        try:
            urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 401, path
        else:
            raise AssertionError(f"{path} answered without a session")
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(gw.base_url + "/")
        page.fill("input[name=token]", "not-the-token")
        page.click("button[type=submit]")
        expect(page.locator(".error")).to_contain_text("not valid")
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator("#bell-count")).not_to_have_text("…")  # the live feed works too
    finally:
        context.close()


def test_cron_jobs_can_be_added_refused_with_a_reason_and_removed(
    gw: GatewayProcess, page: Any
) -> None:
    page.goto(gw.base_url + "/ui/cron")
    form = page.locator("form.grid-form")
    form.locator("input[name=name]").fill("nightly-digest")
    form.locator("select[name=kind]").select_option("every")
    form.locator("input[name=expr]").fill("banana")
    form.locator("textarea[name=prompt]").fill("Summarise the day")
    form.locator("button[type=submit]").click()
    expect(page.locator("p.error")).to_contain_text("banana")  # refused, with the reason
    form = page.locator("form.grid-form")
    form.locator("input[name=name]").fill("nightly-digest")
    form.locator("input[name=expr]").fill("12h")
    form.locator("textarea[name=prompt]").fill("Summarise the day")
    form.locator("button[type=submit]").click()
    row = page.locator("tr", has_text="nightly-digest")
    expect(row).to_contain_text("every 12h")
    expect(row).to_contain_text("scheduled")
    row.locator("button", has_text="Remove").click()
    expect(page.locator("tr", has_text="nightly-digest")).to_have_count(0)


def test_pause_and_resume_a_workspace_and_filter_the_workspace_list(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    for name in ("alpha-notes", "alpha-ops", "beta-lab"):
        home.write_heartbeat(with_tasks("- Something to do"), name)
    page.goto(gw.base_url + "/ui/w/alpha-ops")
    page.click("button:text('Pause')")
    expect(page.locator(".actions .tag")).to_contain_text("paused (user)")
    status = home.cli_json("heartbeat", "status")
    (ops,) = [w for w in status["workspaces"] if w["workspace"] == "alpha-ops"]
    assert ops["paused"] is True
    page.goto(gw.base_url + "/ui/workspaces")
    page.fill("input[name=q]", "alpha")
    expect(page.locator("#ws-table tbody tr")).to_have_count(2)  # filtered as you type
    page.select_option("select[name=state]", "paused")
    expect(page.locator("#ws-table tbody tr")).to_have_count(1)
    expect(page.locator("#ws-table tbody tr")).to_contain_text("alpha-ops")
    page.click("#ws-table a:text('alpha-ops')")
    page.click("button:text('Resume')")
    expect(page.locator(".actions")).not_to_contain_text("paused")


def test_a_message_the_agent_sends_during_a_chat_turn_lands_in_the_slot(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    """(With `message` in bot.tools.auto_approve: a dashboard chat has nobody to ask.)"""
    from vikingbot.testing.fake_openai import tool_call

    home.llm.script([tool_call("message", {"text": "Sent with the message tool."}), "All done."])
    page.goto(gw.base_url + "/ui/chat/tools")
    page.fill("textarea[name=text]", "tell me something")
    page.click(".chat-form button")
    log = page.locator("#chat-log")
    expect(log).to_contain_text("All done.", timeout=30_000)
    expect(log).to_contain_text("Sent with the message tool.")


def test_a_workspace_page_lists_its_skills_and_the_skipped_ones(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    path = home.write_heartbeat(with_tasks("- Something"), "skilled")

    def skill(root: Any, name: str, text: str) -> None:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "SKILL.md").write_text(text)

    ws_skills = path.parent / "skills"
    skill(
        home.path / "skills", "weekly-report", "---\nname: weekly-report\ndescription: Mine.\n---\n"
    )
    skill(ws_skills, "triage", "---\nname: triage\ndescription: <b>Sort</b> the inbox.\n---\n")
    skill(ws_skills, "broken", "no front matter\n")
    page.goto(gw.base_url + "/ui/w/skilled")
    rows = page.locator("#skills tbody tr")
    # the gateway's first start added the starter skills to the user's
    expect(rows).to_have_count(4)
    names = [rows.nth(i).locator("td").first.inner_text() for i in range(4)]
    assert names == ["heartbeat-tasks", "triage", "weekly-report", "write-a-skill"]
    expect(rows.nth(1)).to_contain_text("workspace")
    expect(rows.nth(1)).to_contain_text("<b>Sort</b> the inbox.")  # text, never markup
    expect(rows.nth(2)).to_contain_text("user")
    expect(page.locator("#skill-problems")).to_contain_text("skipped")
    expect(page.locator("#skill-problems")).to_contain_text("no front matter")


def test_the_chat_shows_its_newest_message_on_load_and_after_a_send(
    home: Home, gw: GatewayProcess, page: Any
) -> None:
    """Issue 30 item 5: a long chat opened at its top hid the newest messages."""
    from vikingbot.delivery.inbox import Inbox
    from vikingbot.store.db import StateStore

    store = StateStore.open(home.database_url)
    try:
        for n in range(40):
            Inbox(store).add("long", f"Result number {n}.", source="heartbeat:shared")
    finally:
        store.close()
    at_end = "(() => { const l = document.getElementById('chat-log');"
    at_end += " return l.scrollHeight > l.clientHeight + 50"
    at_end += " && l.scrollTop + l.clientHeight >= l.scrollHeight - 2; })()"
    page.goto(gw.base_url + "/ui/chat/long")
    expect(page.locator("#chat-log")).to_contain_text("Result number 39.")
    page.wait_for_function(at_end)  # scrolled, and to its end (once the page's script ran)
    home.llm.script([reply("The answer to the last question.")])
    page.fill("textarea[name=text]", "and now?")
    page.click(".chat-form button")
    expect(page.locator("#chat-log")).to_contain_text("The answer to the last", timeout=30_000)
    page.wait_for_function(at_end)


# last: it stops the module's gateway
def test_a_picture_sent_on_the_chat_form_reaches_the_model_as_an_image(
    home: Home, gw: GatewayProcess, page: Any, tmp_path: Any
) -> None:
    from tests.media.conftest import photo

    board = tmp_path / "board.jpg"
    board.write_bytes(photo(800, 600))
    home.llm.script([reply("Circles on a whiteboard.")])
    before = len(home.llm.requests)
    # without the form's CSRF token a multipart post is refused, its file unread
    refused = page.request.post(
        gw.base_url + "/ui/chat/pics",
        multipart={"text": "x", "files": {"name": "a.jpg", "mimeType": "image/jpeg",
                                          "buffer": board.read_bytes()}},
    )  # fmt: skip
    assert refused.status == 403
    page.goto(gw.base_url + "/ui/chat/pics")
    page.fill("textarea[name=text]", "what is on the board?")
    page.set_input_files("input[name=files]", str(board))
    page.click(".chat-form button")
    expect(page.locator("#chat-log")).to_contain_text("Circles on a whiteboard.", timeout=30_000)
    (req,) = home.llm.requests[before:]
    content = req.messages[-1]["content"]
    assert content[0]["text"].startswith("what is on the board?")
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    (kept,) = sorted(home.data.rglob("inbox/*-board.jpg"))
    assert kept.read_bytes() == board.read_bytes()


def test_the_gateway_stops_promptly_with_a_dashboard_page_open(
    gw: GatewayProcess, page: Any
) -> None:
    """An open page holds a live event stream; stopping must not wait for it to end.
    (Last in this module: it stops the module's gateway.)"""
    page.goto(gw.base_url + "/ui/inbox")
    expect(page.locator("#bell-count")).not_to_have_text("…")
    started = time.monotonic()
    assert gw.stop() == 0, gw.output
    took = time.monotonic() - started
    # the HTTP server's own drain allows 5 s; a stream that kept it open would use it all
    assert took < 4.5, f"stopping took {took:.1f}s with a dashboard page open:\n{gw.output}"


def urllib_status(url: str, page: Any) -> int:
    """The status of a GET with the page's session cookie."""
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    req = urllib.request.Request(url, headers={"Cookie": cookies})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
