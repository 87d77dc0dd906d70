"""`heartbeat parked` / `unpark`: an entry parked for any reason can be restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.harness import build_harness, with_tasks
from tests.support.signatures import tick
from vikingbot.errors import HeartbeatError
from vikingbot.testing.fake_openai import FakeOpenAI, error, reply


async def test_parked_entry_is_listed_and_unparked(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, mode="per-task", max_retries=2):
        h.user_session()
        path = h.write(with_tasks("- Fragile job"))
        h.fake.default = error(400, "bad request")
        for _ in range(3):
            await tick(h, "Fragile job")
        assert "<!-- parked: failed 2 times" in path.read_text()
        (row,) = h.hb.parked()
        assert (row["workspace"], row["entry"], row["line"]) == ("shared", "Fragile job", 6)
        assert row["reason"].startswith("failed 2 times: ") and row["retries"] == 2
        with pytest.raises(HeartbeatError, match="no parked entry 'Water the plants'"):
            h.hb.unpark("Water the plants")
        done = h.hb.unpark("Fragile job")
        assert done["entry"] == "Fragile job" and done["was"].startswith("failed 2 times")
        assert "parked" not in path.read_text() and h.hb.parked() == []
        h.fake.default = reply("HEARTBEAT_OK")
        assert await tick(h, "Fragile job") == [("run", "due", "completed")]


async def test_a_second_park_after_unpark_is_told_again(tmp_path: Path, fake: FakeOpenAI) -> None:
    async for h in build_harness(tmp_path, fake, mode="per-task", max_retries=1):
        h.user_session()
        h.write(with_tasks("- Fragile job"))
        h.fake.default = error(400, "bad request")
        await tick(h, "Fragile job")
        h.hb.unpark("Fragile job")
        await tick(h, "Fragile job")
        assert sum("is parked after 1 failed runs" in t for t in h.texts()) == 2
