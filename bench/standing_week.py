"""A simulated week with a silent weekend (issue 30): do the standing orders hold?

The README's user: the shared workspace (the default sandbox), an owner on a chat
platform who writes at 09:00 Monday to Friday and not at all on Saturday and
Sunday (so from Sunday morning every session is older than ``stale_after``, 2
days). Its HEARTBEAT.md holds 20 entries of the README's kinds:

- 4 plain checklist lines (one turn per 10-minute tick; the model's answer, the
  weather for tomorrow, changes once a day);
- 6 ``daily:`` entries (06:00 ... 21:00);
- 5 ``every:`` entries (30m, 1h, 2h, 6h, 1d);
- 5 ``every: 30m only-if: news:<scope>`` entries whose ``command`` checker prints
  a news file that changes at 08:00, 13:00 and 18:00 (a real subprocess).

1,008 ten-minute ticks on a FakeClock through the real service and agent loop
(provider ``openai`` pointed at a ``FakeOpenAI`` on loopback; every answer names
its entry and time, so only the checklist repeats itself). Printed per day:
results delivered to the owner against those the schedules promise (target:
equal), and model calls.

    uv run --dev python bench/standing_week.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _heartbeat_setup import make_runtime, with_tasks
from loguru import logger

from vikingbot.clock import FakeClock
from vikingbot.delivery.service import Outgoing
from vikingbot.gateway import compose
from vikingbot.session.types import Message, SessionKey
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply

MONDAY = datetime(2026, 3, 9, tzinfo=UTC)
TICK_S = 600
DAYS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 7
OWNER = SessionKey("telegram", "default", "42")
CHECKLIST = [
    "- Check the weather for Berlin and tell me if it will rain tomorrow.",
    "- Tell me if a line in todo.md is due within a day.",
    "- Look at the shared calendar for clashes.",
    "- Tell me when the library books are due.",
]
DAILY = ["06:00", "07:00", "08:30", "12:00", "17:30", "21:00"]
EVERY = {"30m": 48, "1h": 24, "2h": 12, "6h": 4, "1d": 1}  # runs a day
NEWS_SCOPES = ["mail", "prs", "issues", "builds", "alerts"]
NEWS_AT = (8, 13, 18)  # hours at which every news file changes
WEATHER = ["dry", "rain from 14:00", "windy", "snow", "dry", "rain at night", "sunny"]


def heartbeat_md() -> str:
    lines = list(CHECKLIST)
    lines += [f"- daily: {t} title: Daily {t} task: Brief for {t}." for t in DAILY]
    lines += [f"- every: {e} title: Every {e} task: Check round {e}." for e in EVERY]
    lines += [
        f"- every: 30m only-if: news:{s} title: News {s} task: Summarise the new {s}."
        for s in NEWS_SCOPES
    ]
    return with_tasks(*lines)


def expected_per_day() -> int:
    """What the schedules promise a day: the checklist's one piece of news, each
    daily entry once, each every: entry 24h/interval times, each news entry once
    per change of its news."""
    return 1 + len(DAILY) + sum(EVERY.values()) + len(NEWS_SCOPES) * len(NEWS_AT)


async def run_week(home: Path) -> dict[str, Any]:
    from vikingbot.testing.fake_openai import FakeOpenAI

    clock = FakeClock(MONDAY - timedelta(minutes=20))
    news_dir = home / "news"
    news_dir.mkdir(parents=True)
    for scope in NEWS_SCOPES:  # no news yet (a missing file would be a checker error)
        (news_dir / scope).write_text("")

    def answer(request: RecordedRequest) -> Step:
        asked = request.last_user_text
        now = clock.now()
        if "Read HEARTBEAT.md" in asked:
            return reply(f"Tomorrow in Berlin: {WEATHER[now.weekday()]}.")
        title = next((t for t in asked.splitlines() if t.startswith("Task (")), "Task")
        news = next((t for t in asked.splitlines() if t.startswith("NEWS ")), "")
        return reply(f"{title} at {now:%a %H:%M}. {news}")

    with FakeOpenAI.start() as fake:
        fake.responder = answer
        checker = ["sh", "-c", f'cat "{news_dir}/$VIKINGBOT_SCOPE" 2>/dev/null']
        cfg = {
            "bot": {
                "owner": "telegram:42",
                "agents": {"provider": "openai", "model": "fake"},
                "providers": {
                    "openai": {"api_base": fake.base_url, "api_key": "k", "max_retries": 0}
                },
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
                "heartbeat": {
                    "timezone": "UTC",
                    "interval_seconds": TICK_S,
                    "checkers": {"news": {"kind": "command", "command": checker}},
                },
            }
        }
        rt = make_runtime(home, clock, cfg)
        per_day: dict[str, Counter[str]] = {}

        async def record(item: Outgoing) -> bool:  # what the channel manager keeps: the outbox
            msg = item.message
            if msg.dedupe_key:
                rt.delivery.outbox.claim(msg, msg.dedupe_key)
                rt.delivery.outbox.mark_sent(msg.dedupe_key)
            if (msg.metadata or {}).get("source") != "heartbeat:notice":
                per_day[f"{clock.now():%m-%d %a}"]["delivered"] += 1
            return True

        rt.delivery.connect(record)
        ws = rt.workspaces.workspace_for(OWNER)  # created from the template
        (ws / "HEARTBEAT.md").write_text(heartbeat_md())
        svc = compose.heartbeat(rt)
        per_day[f"{clock.now():%m-%d %a}"] = Counter()  # the set-up cycle, not counted
        await svc.run_cycle("scheduled")  # every entry first seen before Monday
        stale_days: set[str] = set()
        last_user: datetime | None = MONDAY - timedelta(days=3)  # wrote last Friday
        rt.sessions.append(OWNER, Message("user", "see you Monday", last_user))
        t0 = time.perf_counter()
        for _ in range(DAYS * 24 * 3600 // TICK_S):
            clock.advance(seconds=TICK_S)
            now = clock.now()
            day = f"{now:%m-%d %a}"
            per_day.setdefault(day, Counter())
            if now.weekday() < 5 and (now.hour, now.minute) == (9, 0):  # the owner writes
                rt.sessions.append(OWNER, Message("user", "morning", now))
                last_user = now
            if now.minute == 0 and now.hour in NEWS_AT:
                for scope in NEWS_SCOPES:
                    (news_dir / scope).write_text(f"NEWS {scope} {now:%a %H:%M}\n")
            calls = len(fake.requests)
            report = await svc.run_cycle("scheduled")
            per_day[day]["calls"] += len(fake.requests) - calls
            if last_user is None or now - last_user > timedelta(days=2):  # stale_after
                stale_days.add(day)
            for r in report.rows:
                if r.decision == "run":
                    per_day[day][f"outcome {r.outcome}"] += 1
                    per_day[day][f"entry {r.entry} {r.outcome}"] += 1
        wall = time.perf_counter() - t0
        await rt.aclose()
    return {"per_day": per_day, "stale": stale_days, "wall": wall}


def main() -> None:
    logger.remove()
    with tempfile.TemporaryDirectory() as tmp:
        week = asyncio.run(run_week(Path(tmp) / "home"))
    expected = expected_per_day()
    print(
        "simulated week: 1,008 ticks of 10 min, the shared workspace, 20 entries "
        "(4 checklist, 6 daily, 5 every, 5 every+only-if), real agent loop, fake OpenAI"
    )
    print(
        "the owner wrote last Friday and writes at 09:00 Monday to Friday; nothing on Saturday and Sunday"
    )
    print(
        f"{'day':<9} {'delivered':>9} {'expected':>8} {'model calls':>11}  "
        "every chat stale  not sent again (repeat)"
    )
    days = [(MONDAY + timedelta(days=i)).strftime("%m-%d %a") for i in range(DAYS)]
    for day in days:
        c = week["per_day"].get(day, Counter())
        stale = "yes" if day in week["stale"] else "no"
        print(
            f"{day:<9} {c['delivered']:>9} {expected:>8} {c['calls']:>11}  {stale:<16}  "
            f"{c['outcome repeat']}"
        )
    print(f"(wall time {week['wall']:.1f} s)")
    if "-v" in sys.argv:  # per entry and outcome
        for day in days:
            print(day, sorted(k for k in week["per_day"][day].items() if k[0].startswith("entry")))


if __name__ == "__main__":
    main()
