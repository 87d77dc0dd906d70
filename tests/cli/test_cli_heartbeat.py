"""`vikingbot heartbeat enable | disable | pause | resume | status | plan | check`
through the CLI runner, with exact exit codes and the JSON contract of docs/heartbeat.md."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.cli import Cli, add_task

Fresh = Callable[[str], None]
PLAN_FIELDS = {
    "workspace",
    "session",
    "entry",
    "name",
    "decision",
    "reason",
    "detail",
    "next_due",
    "model",  # provider / model a run would use (issue 31)
}
STATUS_FIELDS = {
    "enabled",
    "interval_seconds",
    "mode",
    "target",
    "last_cycle_at",
    "next_cycle_at",
    "agent_problem",
    "problems",
    "workspaces",
}
WORKSPACE_FIELDS = {
    "workspace",
    "paused",
    "paused_reason",
    "last_outcome",
    "last_run_at",
    "last_decision",
    "last_reason",
    "next_due",
    "tokens_today",
    "cost_today",
}
FEED_ENTRY = "- every: 30m only-if: feed title: Feed task: Read it\n"


def plan(cli: Cli, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    result = cli("heartbeat", "plan", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    rows: list[dict[str, object]] = json.loads(result.stdout)
    for row in rows:
        assert set(row) == PLAN_FIELDS
    return rows


def hb_status(cli: Cli) -> dict[str, Any]:
    result = cli("heartbeat", "status", "--json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    assert set(data) >= STATUS_FIELDS  # the documented fields (more may be added)
    return data


def written_enabled(home: Path) -> object:
    return json.loads((home / "config.json").read_text("utf-8"))["bot"]["heartbeat"]["enabled"]


def test_disable_and_enable_flip_the_file(cli: Cli, home: Path) -> None:
    result = cli("heartbeat", "disable")
    assert result.exit_code == 0, result.stderr
    assert "heartbeat disabled" in result.stderr
    assert written_enabled(home) is False
    assert hb_status(cli)["enabled"] is False

    result = cli("heartbeat", "enable")
    assert result.exit_code == 0, result.stderr
    assert written_enabled(home) is True
    assert hb_status(cli)["enabled"] is True


def test_pause_an_unknown_workspace_names_the_known_ones(cli: Cli) -> None:
    result = cli("heartbeat", "pause", "NOPE")
    assert result.exit_code == 1
    assert "'NOPE'" in result.stderr and "known: none" in result.stderr

    assert cli("onboard").exit_code == 0
    for command in ("pause", "resume"):
        result = cli("heartbeat", command, "NOPE")
        assert result.exit_code == 1
        assert "'NOPE'" in result.stderr and "known: shared" in result.stderr
    assert cli("heartbeat", "pause", "../shared").exit_code == 1
    assert cli("heartbeat", "pause").exit_code == 2


def test_pause_and_resume_shared(cli: Cli, shared: Path) -> None:
    def shared_row() -> dict[str, Any]:
        data = hb_status(cli)
        rows = {w["workspace"]: w for w in data["workspaces"]}
        assert set(rows["shared"]) >= WORKSPACE_FIELDS
        row: dict[str, Any] = rows["shared"]
        return row

    assert shared_row()["paused"] is False
    result = cli("heartbeat", "pause", "shared")
    assert result.exit_code == 0, result.stderr
    assert "shared paused" in result.stderr
    assert shared_row()["paused"] is True
    assert [(r["workspace"], r["reason"]) for r in plan(cli)] == [("shared", "paused")]

    result = cli("heartbeat", "resume", "shared")
    assert result.exit_code == 0, result.stderr
    assert shared_row()["paused"] is False
    assert [(r["workspace"], r["reason"]) for r in plan(cli)] == [("shared", "empty")]


def test_plan_on_the_template_is_an_empty_skip(cli: Cli, shared: Path) -> None:
    assert plan(cli) == [
        {
            "workspace": "shared",
            "session": None,
            "entry": None,
            "name": "",
            "decision": "skip",
            "reason": "empty",
            "detail": "nothing to do: put tasks under `## Active Tasks` in "
            f"{shared / 'HEARTBEAT.md'}",
            "next_due": None,
            "model": None,  # a skip runs no turn
        }
    ]


def test_plan_before_anyone_chatted_reads_the_shared_workspace(cli: Cli) -> None:
    assert cli("onboard").exit_code == 0
    assert [(r["workspace"], r["reason"]) for r in plan(cli)] == [("shared", "empty")]


def test_plan_with_a_task_runs_it(cli: Cli, shared: Path) -> None:
    add_task(shared, "- [ ] Water the plants\n")
    rows = plan(cli)
    assert [(r["workspace"], r["decision"], r["reason"]) for r in rows] == [
        ("shared", "run", "due")
    ]
    assert " / " in rows[0]["model"]  # the provider and model the turn would use


def test_plan_summary_counts_in_words_a_person_would_write(cli: Cli, shared: Path) -> None:
    add_task(shared, "- [ ] Water the plants\n")
    result = cli("heartbeat", "plan")
    assert result.exit_code == 0, result.stderr
    assert "1 workspace, 1 decision\n" in result.stdout  # not "1 workspaces"


def test_run_now_rows_carry_the_name_and_next_due_plan_has(cli: Cli, shared: Path) -> None:
    add_task(shared, "- every: 30m title: Builds task: Check CI\n")
    result = cli("heartbeat", "run-now", "--json")
    assert result.exit_code == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert (row["name"], row["reason"]) == ("Builds", "not-due")
    planned = {r["name"]: r["next_due"] for r in plan(cli)}  # first seen by the run
    assert row["next_due"] == planned["Builds"] is not None


def test_plan_when_disabled_by_the_environment(cli: Cli, shared: Path) -> None:
    add_task(shared, "- [ ] Water the plants\n")
    rows = plan(cli, env={"VIKINGBOT_BOT__HEARTBEAT__ENABLED": "false"})
    assert len(rows) == 1
    assert (rows[0]["workspace"], rows[0]["decision"], rows[0]["reason"]) == (
        "*",
        "skip",
        "disabled",
    )


def test_plan_text_output_is_a_summary_then_what_matters(
    cli: Cli, home: Path, fresh_session: Fresh
) -> None:
    from vikingbot.session.types import SessionKey
    from vikingbot.workspace.manager import checked_name

    assert cli("onboard").exit_code == 0
    assert cli("config", "set", "bot.sandbox.mode", "per-session").exit_code == 0
    root = home / "data" / "workspace"
    names = []
    for chat in range(5):
        fresh_session(f"telegram:default:{chat}")
        names.append(checked_name(SessionKey("telegram", "default", str(chat)), "per-session"))
        (root / names[-1]).mkdir(parents=True, exist_ok=True)
        (root / names[-1] / "HEARTBEAT.md").write_text("## Active Tasks\n\n")
    (root / names[3] / "HEARTBEAT.md").write_text("## Active Tasks\n\n- Water the plants\n")
    assert cli("heartbeat", "pause", names[4]).exit_code == 0

    result = cli("heartbeat", "plan")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "6 workspaces, 6 decisions" in out  # and the onboarded shared one, unused
    assert re.search(r"\b3\s+skip\s+empty\b", out)
    assert re.search(r"\b1\s+skip\s+no-sessions\b", out)
    assert re.search(r"\b1\s+run\s+due\b", out) and re.search(r"\b1\s+skip\s+paused\b", out)
    # the rows shown: the run and the paused workspace, not the empty ones
    assert names[3] in out and names[4] in out
    assert names[0] not in out
    assert "4 routine skips not shown" in out

    every = cli("heartbeat", "plan", "--all")
    assert every.exit_code == 0, every.stderr
    assert all(name in every.stdout for name in names)


def configure_feed(cli: Cli, shared: Path, watched: Path) -> None:
    add_task(shared, FEED_ENTRY)
    checker = json.dumps({"kind": "file", "path": str(watched)})
    result = cli("config", "set", "bot.heartbeat.checkers.feed", checker)
    assert result.exit_code == 0, result.stderr


def check(cli: Cli, title: str = "Feed") -> dict[str, object]:
    result = cli("heartbeat", "check", title, "--json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_check_runs_the_file_checker(cli: Cli, shared: Path, tmp_path: Path) -> None:
    watched = tmp_path / "feed.xml"
    configure_feed(cli, shared, watched)

    nothing = check(cli)
    assert (nothing["workspace"], nothing["checker"], nothing["has_work"]) == (
        "shared",
        "feed",
        False,
    )

    watched.write_text("<item>news</item>", "utf-8")
    found = check(cli)
    assert found["has_work"] is True
    assert found["error"] is None
    assert isinstance(found["signature"], str)
    assert re.fullmatch(r"[0-9a-f]{32}", found["signature"])
    assert str(watched) in str(found["context"])
    assert check(cli)["signature"] == found["signature"]  # same news, same signature

    watched.write_text("<item>news</item><item>more news</item>", "utf-8")
    assert check(cli)["signature"] != found["signature"]


def test_check_an_unknown_title_exits_1(cli: Cli, shared: Path, tmp_path: Path) -> None:
    configure_feed(cli, shared, tmp_path / "feed.xml")
    result = cli("heartbeat", "check", "Nope", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "'Nope'" in result.stderr
    assert cli("heartbeat", "check").exit_code == 2


def test_check_an_entry_without_a_checker_exits_1(cli: Cli, shared: Path) -> None:
    add_task(shared, "- every: 1h title: Plain task: Say hi\n")
    result = cli("heartbeat", "check", "Plain")
    assert result.exit_code == 1
    assert "no only-if" in result.stderr


def test_plan_exits_1_on_a_file_with_errors_and_names_the_fix(cli: Cli, shared: Path) -> None:
    """Issue 16: `plan` exited 0 on a file with errors; `evry:` got no suggestion."""
    add_task(shared, "- evry: 30m title: Reviews task: Summarise new review requests.\n")
    for args in (("heartbeat", "plan"), ("heartbeat", "plan", "--json")):
        result = cli(*args)
        assert result.exit_code == 1, result.stdout
        path = shared / "HEARTBEAT.md"
        line = (
            path.read_text("utf-8")
            .splitlines()
            .index("- evry: 30m title: Reviews task: Summarise new review requests.")
        )
        assert f"problem: {path}:{line + 1}: evry: is not a key; did you mean every:?" in (
            " ".join(result.stderr.split())
        )
    json.loads(cli("heartbeat", "plan", "--json").stdout)  # the JSON is still whole
    # issue 30: the headline counts the problem instead of saying all is quiet
    headline = cli("heartbeat", "plan").stdout
    assert "nothing needs attention" not in headline
    assert "1 problem in HEARTBEAT.md files (below)" in headline


README = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
(README_ENTRY,) = [x + "\n" for x in README.splitlines() if "only-if: github:prs" in x]


def test_plan_flags_the_readme_example_without_its_checker(cli: Cli, shared: Path) -> None:
    """Issue 16: `plan` said nothing about `only-if: github:prs` with no github checker."""
    add_task(shared, README_ENTRY)
    result = cli("heartbeat", "plan", "--json")
    assert result.exit_code == 1
    (row,) = [r for r in json.loads(result.stdout) if r["entry"] == "Reviews"]
    assert (row["decision"], row["reason"]) == ("skip", "checker-missing")
    assert "problem: " in result.stderr and "only-if: github is not configured" in result.stderr
    # configured as the README says: the entry waits for its time, and plan exits 0
    (line,) = [x for x in README.splitlines() if "config set bot.heartbeat.checkers.github" in x]
    args = shlex.split(line)[3:]  # uv run vikingbot | config set ...
    assert cli(*args).exit_code == 0
    result = cli("heartbeat", "plan", "--json")
    assert result.exit_code == 0, result.stderr
    (row,) = [r for r in json.loads(result.stdout) if r["entry"] == "Reviews"]
    assert (row["reason"], row["detail"]) == ("not-due", "every 30m")


def test_plan_skip_rows_say_how_to_change_them(
    cli: Cli, shared: Path, fresh_session: Fresh
) -> None:
    """Issue 9 item 7 / issue 16: every skip row's detail holds the fix."""
    add_task(shared, "- Check the build\n")
    fresh_session("telegram:default:42")
    assert cli("sessions", "heartbeat", "off", "telegram:default:42").exit_code == 0
    rows = plan(cli)
    (flag,) = [r for r in rows if r["reason"] == "skip-flag"]
    assert flag["detail"] == (
        "heartbeat is off for telegram:default:42: "
        "`vikingbot sessions heartbeat on telegram:default:42`"
    )
    result = cli("heartbeat", "plan", "--all", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert "`vikingbot sessions heartbeat on telegram:default:42`" in " ".join(
        result.stdout.split()
    )

    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    now = datetime.now(ZoneInfo("Europe/Paris"))
    start, end = ((now + timedelta(hours=h)).strftime("%H:%M") for h in (2, 3))
    window = json.dumps({"start": start, "end": end, "timezone": "Europe/Paris"})
    assert cli("config", "set", "bot.heartbeat.active_hours", window).exit_code == 0
    (quiet,) = [r for r in plan(cli) if r["reason"] == "quiet-hours"]
    assert quiet["detail"] == (
        f"quiet hours {end}–{start} Europe/Paris: "
        "`vikingbot heartbeat run-now --force` runs a cycle now"
    )


def test_run_now_skip_rows_say_what_plan_says(cli: Cli, shared: Path, fresh_session: Fresh) -> None:
    """Issue 9 item 7: `run-now` printed a skip-flag row with no word on how to change it,
    while `plan` gave the command; both now say the same."""
    from vikingbot.testing.fake_openai import FakeOpenAI, reply

    add_task(shared, "- every: 30m title: Reviews task: Summarise new review requests.\n")
    assert cli("sessions", "heartbeat", "off", "telegram:default:42").exit_code == 0
    fresh_session("cli:default:local")
    with FakeOpenAI.start() as llm:
        llm.default = reply("HEARTBEAT_OK")
        for key, value in (
            ("bot.agents.provider", "openai"),
            ("bot.agents.model", "fake-model"),
            ("bot.providers.openai", json.dumps({"apiKey": "sk-t", "apiBase": llm.base_url})),
            ("bot.heartbeat.mode", "per-task"),
        ):
            assert cli("config", "set", key, value).exit_code == 0
        planned = {(r["reason"], r["session"] or r["entry"]): r["detail"] for r in plan(cli)}
        fix = planned[("skip-flag", "telegram:default:42")]
        assert fix == (
            "heartbeat is off for telegram:default:42: "
            "`vikingbot sessions heartbeat on telegram:default:42`"
        )
        result = cli("heartbeat", "run-now", env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        (at,) = [i for i, x in enumerate(lines) if re.match(r"telegram:default:42\s+skip-flag", x)]
        assert lines[at + 1] == f"    {fix}", result.stdout  # the note under the row
        assert "\n    every 30m\n" in result.stdout  # a skip with no fix keeps its detail

        result = cli("heartbeat", "run-now", "--json")
        assert result.exit_code == 0, result.stderr
        rows = json.loads(result.stdout)
        skips = {r["session"] or r["entry"]: r["detail"] for r in rows if r["decision"] == "skip"}
        assert skips.get("Reviews") == planned[("not-due", "Reviews")]
        assert all(r["detail"] is None for r in rows if r["decision"] == "run")


def test_status_lists_an_unconfigured_checker_as_a_problem(cli: Cli, shared: Path) -> None:
    add_task(shared, README_ENTRY)
    problems = hb_status(cli)["problems"]
    assert [p["error"].split(" (")[0] for p in problems] == ["only-if: github is not configured"]
