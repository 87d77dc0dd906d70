"""Work signatures, continuations, owner notices and targets, through the real loop."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.harness import build_harness, with_tasks
from tests.support.signatures import feed_setup, tick
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply, tool_call


async def test_unchanged_signature_skips_and_news_runs(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        feed = feed_setup(h)
        feed.write_text("item 1\n")
        await h.cycle()  # first seen
        assert await tick(h) == [("run", "due", "noop")]
        assert h.model_calls() == 1
        assert await tick(h) == [("skip", "unchanged", None)]
        feed.write_text("item 1\nitem 2\n")
        assert await tick(h) == [("run", "due", "noop")]
        assert h.model_calls() == 2


async def test_no_work_skips_without_a_call(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        feed_setup(h)  # the feed file does not exist: no work
        await h.cycle()
        assert await tick(h) == [("skip", "no-work", None)]
        assert h.model_calls() == 0


async def test_own_write_moves_the_watermark(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, safe_tools=["read_file", "write_file", "message"]):
        feed = feed_setup(h)
        feed.write_text("unhandled\n")
        await h.cycle()
        h.fake.script(
            [
                tool_call("write_file", {"path": "feed.txt", "content": "handled\n"}),
                reply("HEARTBEAT_OK"),
            ]
        )
        assert await tick(h) == [("run", "due", "noop")]
        assert feed.read_text() == "handled\n"
        # the agent's own write changed what the checker sees, but does not wake it again
        assert await tick(h) == [("skip", "unchanged", None)]
        assert h.model_calls() == 2


async def test_read_only_run_keeps_the_watermark(tmp_path: Path, fake: FakeOpenAI) -> None:
    """News that arrives while a run without own writes is going is not swallowed."""
    async for h in build_harness(tmp_path, fake):
        feed = feed_setup(h)
        feed.write_text("A\n")
        await h.cycle()

        def meanwhile(_req: Any, feed: Path = feed) -> str:
            feed.write_text("A\nB\n")  # someone else adds news during the turn
            return "HEARTBEAT_OK"

        h.fake.responder = meanwhile
        assert await tick(h) == [("run", "due", "noop")]
        h.fake.responder = None
        assert await tick(h) == [("run", "due", "noop")]  # B wakes the agent
        assert await tick(h) == [("skip", "unchanged", None)]


async def test_failed_run_clears_the_watermark(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        feed = feed_setup(h)
        feed.write_text("A\n")
        await h.cycle()
        h.fake.script([error(400, "bad request")])
        assert await tick(h) == [("run", "due", "failed")]
        # same content, but the failed run cleared the watermark: it is retried
        assert await tick(h) == [("run", "due", "noop")]
        assert await tick(h) == [("skip", "unchanged", None)]


async def test_three_continuations_park_and_tell_owner(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        path = h.write(
            with_tasks("- every: 10m title: Migration task: Move the photos, a batch at a time")
        )
        h.fake.default = reply("Moved a batch, more to do. HEARTBEAT_KEEP")
        await h.cycle()
        got = [await tick(h, "Migration") for _ in range(4)]
        assert [[(d, r) for d, r, _ in g] for g in got] == [
            [("run", "due")],
            [("run", "continuation")],
            [("run", "continuation")],
            [("skip", "parked")],
        ]
        assert "<!-- parked: asked to continue 3 times in a row -->" in path.read_text()
        assert sum("is parked" in t for t in h.texts()) == 1
        assert not any("HEARTBEAT_KEEP" in t for t in h.texts())
        assert h.model_calls() == 3


async def test_malformed_entry_is_told_to_owner_once(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake):
        h.user_session()
        h.write(with_tasks("- every: 10m daily: 09:00 title: Broken task: x", "- Water the plants"))
        await h.cycle()
        h.clock.advance(minutes=5)
        await h.cycle()
        notices = [t for t in h.texts() if "HEARTBEAT.md problem" in t]
        assert len(notices) == 1
        assert "HEARTBEAT.md:6)" in notices[0]
        assert "found every:, daily:" in notices[0]
        assert h.model_calls() == 1  # the good entry still ran (once: not due again)


async def test_target_none_delivers_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, target="none"):
        h.user_session()
        h.write(with_tasks("- Check the mail"))
        h.fake.script([tool_call("message", {"text": "You have mail."}), reply("HEARTBEAT_OK")])
        report = await h.cycle()
        assert h.sent == []
        assert [r.outcome for r in report.rows if r.decision == "run"] == ["silent"]


async def test_target_last_goes_to_the_most_recent_chat(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, target="last"):
        h.rt.config.bot.owner = None
        h.rt.config.bot.channels.telegram.allow_from = ["42", "43"]
        h.user_session(SessionKey("telegram", "default", "42"), ago=timedelta(hours=2))
        h.user_session(SessionKey("telegram", "default", "43"), ago=timedelta(minutes=1))
        h.write(with_tasks("- Check the mail"))
        h.fake.script([reply("You have mail.")])
        await h.cycle()
        assert [(m.chat_id, m.text) for m in h.sent] == [("43", "You have mail.")]
