"""Once per piece of news (issue 30): the same result is delivered once per repeat window.

One process, the real agent loop and SDK against the fake model server; the cycles
are an interval apart on the harness's clock.
"""

from __future__ import annotations

from tests.support.harness import Harness, with_tasks
from vikingbot.testing.fake_openai import reply

WEATHER = "- Check the weather for Berlin and tell me if it will rain tomorrow."


async def cycles(h: Harness, replies: list[str]) -> list[str | None]:
    """One cycle per reply, an interval apart; the outcome of each cycle's run."""
    outcomes: list[str | None] = []
    for text in replies:
        h.fake.script([reply(text)])
        report = await h.cycle()
        outcomes += [r.outcome for r in report.rows if r.decision == "run"]
        h.clock.advance(seconds=h.rt.config.bot.heartbeat.interval_seconds)
    return outcomes


async def test_the_same_reply_three_cycles_in_a_row_is_delivered_once(harness: Harness) -> None:
    h = harness
    h.user_session()
    h.write(with_tasks(WEATHER))
    said = [
        "Rain tomorrow from 14:00.",
        "rain  tomorrow FROM 14:00.",
        "**Rain** tomorrow from 14:00.",
    ]
    assert await cycles(h, said) == ["delivered", "repeat", "repeat"]
    assert h.texts() == ["Rain tomorrow from 14:00."]
    assert h.model_calls() == 3
    rows = h.hb.state.runs(limit=10)
    assert [r["outcome"] for r in rows if r["decision"] == "run"] == [
        "repeat",
        "repeat",
        "delivered",
    ]


async def test_new_news_and_old_news_after_the_window_are_delivered(harness: Harness) -> None:
    h = harness
    h.user_session()
    h.write(with_tasks(WEATHER))
    said = ["Rain tomorrow from 14:00.", "Rain tomorrow from 16:00."]
    assert await cycles(h, said) == ["delivered", "delivered"]
    h.clock.advance(hours=24)  # bot.heartbeat.repeat_window
    h.user_session()
    assert await cycles(h, ["Rain tomorrow from 14:00."]) == ["delivered"]
    assert h.texts() == [
        "Rain tomorrow from 14:00.",
        "Rain tomorrow from 16:00.",
        "Rain tomorrow from 14:00.",
    ]


async def test_a_zero_window_delivers_every_time(harness: Harness) -> None:
    h = harness
    h.rt.config.bot.heartbeat.repeat_window = 0
    h.user_session()
    h.write(with_tasks(WEATHER))
    assert await cycles(h, ["Rain.", "Rain."]) == ["delivered", "delivered"]
    assert h.texts() == ["Rain.", "Rain."]


async def test_the_inbox_gets_each_piece_of_news_once(harness: Harness) -> None:
    h = harness
    h.rt.config.bot.owner = None  # no owner, no live chat: the inbox
    h.write(with_tasks(WEATHER))
    assert await cycles(h, ["Rain.", "<b>rain</b>."]) == ["inboxed", "repeat"]
    assert [i.text for i in h.rt.delivery.inbox.items()] == ["Rain."]
