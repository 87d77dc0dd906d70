"""One table of reason codes and the fix `heartbeat plan` shows for every skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.dashboard.explain import REASONS as DASHBOARD_REASONS
from vikingbot.heartbeat.reasons import MEANING, FixContext, with_fix
from vikingbot.heartbeat.types import REASONS, Decision

CTX = FixContext(Path("/home/u/.vikingbot/data/workspace"), 2 * 86400)
FILE = "/home/u/.vikingbot/data/workspace/shared/HEARTBEAT.md"


def test_every_reason_code_has_its_meaning_and_the_dashboard_uses_the_same_table() -> None:
    assert set(MEANING) == REASONS
    assert DASHBOARD_REASONS is MEANING


def test_the_docs_table_lists_every_reason_code() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "heartbeat.md").read_text("utf-8")
    missing = [r for r in sorted(REASONS) if f"| `{r}` |" not in docs]
    assert missing == []


@pytest.mark.parametrize(
    ("decision", "shown"),
    [
        (
            Decision("shared", "skip", "skip-flag", session="telegram:default:42"),
            "heartbeat is off for telegram:default:42: "
            "`vikingbot sessions heartbeat on telegram:default:42`",
        ),
        (  # the terminal cannot be sent to: turning it on is no fix (issue 31)
            Decision("shared", "skip", "skip-flag", session="cli:default:local"),
            "cli:default:local is a `vikingbot chat` session: the terminal cannot be sent to, "
            "so results for it go to the inbox (`vikingbot inbox`, or an attached "
            "`vikingbot chat`); this workspace's tasks still run while you chat",
        ),
        (
            Decision("*", "skip", "quiet-hours", detail="quiet hours 22:00–08:00 Europe/Paris"),
            "quiet hours 22:00–08:00 Europe/Paris: `vikingbot heartbeat run-now --force` "
            "runs a cycle now",
        ),
        (Decision("*", "skip", "disabled"), "the heartbeat is off: `vikingbot heartbeat enable`"),
        (
            Decision("shared", "skip", "stale", session="telegram:default:42"),
            "no message in telegram:default:42 for over 2d (bot.heartbeat.stale_after): "
            "results do not go there until someone writes in it",
        ),
        (
            Decision("telegram-42", "skip", "stale", detail="checklist"),
            "the checklist of workspace telegram-42 waits for its chat: no message there for "
            "over 2d (bot.heartbeat.stale_after); its scheduled entries still run",
        ),
        (Decision("work", "skip", "paused"), "paused: `vikingbot heartbeat resume work`"),
        (
            Decision("shared", "skip", "parked", entry="Morning brief", detail="failed 3 times"),
            "parked (failed 3 times): edit the entry, or "
            "`vikingbot heartbeat unpark 'Morning brief' -w shared`",
        ),
        (
            Decision("shared", "skip", "empty", detail="no HEARTBEAT.md"),
            f"no HEARTBEAT.md: put tasks under `## Active Tasks` in {FILE}",
        ),
        (
            Decision("shared", "skip", "unreadable", detail="is a symbolic link"),
            f"{FILE} is a symbolic link: fix or replace the file",
        ),
        # nothing to fix: the planner's words stay
        (Decision("shared", "skip", "not-due", detail="daily at 08:30"), "daily at 08:30"),
        (Decision("shared", "run", "due", detail="only-if gh decides"), "only-if gh decides"),
    ],
)
def test_each_skip_says_how_to_change_it(decision: Decision, shown: str) -> None:
    assert with_fix(decision, CTX) == shown


def test_a_push_target_is_not_called_stale() -> None:
    """Issue 42: nobody writes in a push target, and results do reach it."""
    push = FixContext(CTX.workspace_root, CTX.stale_after_s, frozenset({"notify"}))
    shown = with_fix(Decision("shared", "skip", "stale", session="notify:default:phone"), push)
    assert shown is not None and "until someone writes" not in shown
    assert shown.startswith("notify:default:phone is a push target (outbound only)")


def test_the_push_channel_says_it_is_outbound_only() -> None:
    from vikingbot import registry

    assert registry.load("channels", "notify").outbound_only
    assert not registry.load("channels", "telegram").outbound_only


@pytest.mark.parametrize(
    "reason",
    sorted(
        REASONS - {"not-due", "no-work", "unchanged", "missed", "due", "manual", "continuation"}
    ),
)
def test_every_skip_reason_has_a_detail(reason: str) -> None:
    shown = with_fix(Decision("shared", "skip", reason), CTX)  # type: ignore[arg-type]
    assert shown, reason
