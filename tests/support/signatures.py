"""A guarded heartbeat entry over a feed file, and one cycle ten minutes on (shared by the
heartbeat tests about work signatures, parking, problems and defects)."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Harness, with_tasks

GUARDED = "- every: 10m only-if: feed title: Feed task: Check the feed and act on it"


def feed_setup(h: Harness) -> Path:
    """A file checker named ``feed`` and the guarded entry; the feed file's path."""
    ws = h.workspace()
    feed = ws / "feed.txt"
    h.rt.config.bot.heartbeat.checkers = {  # type: ignore[assignment]
        "feed": {"kind": "file", "path": str(feed)}
    }
    h.user_session()
    h.write(with_tasks(GUARDED))
    return feed


async def tick(h: Harness, entry: str = "Feed") -> list[tuple[str, str, str | None]]:
    """Ten minutes on, the user still around, one cycle: (decision, reason, outcome) of
    ``entry``'s rows."""
    h.clock.advance(minutes=10)
    h.user_session()
    report = await h.cycle()
    return [(r.decision, r.reason, r.outcome) for r in report.rows if r.entry == entry]
