"""The memory pass: a model decides what to keep; every change is a snapshot that can be undone."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.summariser import kind, summariser
from vikingbot.config.schema import Config
from vikingbot.housekeeping.memory_tool import add_line
from vikingbot.memory import versions
from vikingbot.memory.consolidate import parse_reply
from vikingbot.memory.model import provider_call
from vikingbot.session.types import SessionKey
from vikingbot.testing.fake_openai import FakeOpenAI

if TYPE_CHECKING:
    from conftest import Housekeeping

TG = "telegram:default:42"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as server:
        server.responder = summariser()
        yield server


@pytest.fixture
def with_model(hk: Housekeeping, fake: FakeOpenAI) -> Housekeeping:
    """The rig's housekeeping with its memory pass asking the fake model (the real SDK)."""
    config = Config.model_validate(
        {
            "bot": {
                "agents": {"provider": "openai", "model": "gpt-test"},
                "providers": {"openai": {"apiBase": fake.base_url, "apiKey": "sk-test"}},
                "memory": {"consolidateAfterIdle": "6h"},
            }
        }
    )
    hk.service.config = config
    hk.service.complete = provider_call(lambda: config, {})
    return hk


def _ws(hk: Housekeeping) -> Path:
    return hk.workspaces.workspace_for(SessionKey.parse(TG))


async def test_pass_rewrites_memory_as_a_snapshot_that_undo_restores(
    with_model: Housekeeping, fake: FakeOpenAI
) -> None:
    hk = with_model
    ws = _ws(hk)
    (ws / "memory").mkdir(exist_ok=True)
    (ws / "memory" / "MEMORY.md").write_text("# Memory\n\n- written by hand\n")
    hk.clock.set(hk.now - timedelta(hours=8))
    hk.sessions.append(TG, hk.msg("user", "My locker code is MARK-7", 0.34))
    hk.sessions.append(TG, hk.msg("assistant", "Noted.", 0.34))
    hk.sessions.append(TG, hk.msg("user", "hb MARK-9", 0.33, metadata={"heartbeat": True}))
    hk.clock.set(hk.now)

    stats = await hk.service.consolidate_now()
    assert stats is not None and (stats.model_calls, stats.consolidated) == (1, [TG])
    assert [kind(r) for r in fake.requests] == ["memory"]
    assert "written by hand" in fake.requests[0].text  # the model saw the file to merge into
    memory = (ws / "memory" / "MEMORY.md").read_text()
    assert "remembered MARK-7" in memory and "MARK-9" not in memory  # the heartbeat's own words
    [v] = versions.log(ws)
    assert v.id == stats.versions[0]
    assert "+- remembered MARK-7" in v.diff() and "-- written by hand" in v.diff()

    back = versions.undo(ws, v.id[:10])
    assert (ws / "memory" / "MEMORY.md").read_text() == "# Memory\n\n- written by hand\n"
    assert [x.id for x in versions.log(ws)] == [back.id, v.id]


async def test_a_day_without_new_messages_costs_no_model_call(
    with_model: Housekeeping, fake: FakeOpenAI
) -> None:
    hk = with_model
    hk.clock.set(hk.now - timedelta(days=2))
    for i in range(50):
        hk.sessions.append(TG, hk.msg("user", f"fact MARK-{i}", 2))
    hk.clock.set(hk.now - timedelta(days=1))
    first = await hk.service.consolidate_now()
    assert first is not None and first.model_calls == 1
    fake.reset()
    hk.clock.set(hk.now)  # a day later, nothing said
    quiet = await hk.service.consolidate_now()
    assert quiet is not None and (quiet.model_calls, quiet.sessions_seen) == (0, 0)
    assert fake.requests == []
    hk.sessions.append("cron:default:digest", hk.msg("user", "cron prompt", 1))
    hk.clock.advance(hours=7)
    assert (await hk.service.consolidate_now()).model_calls == 0  # type: ignore[union-attr]
    assert fake.requests == []


def test_concurrent_remembers_in_one_workspace_lose_nothing(tmp_path: Path) -> None:
    def remember(n: int) -> None:
        versions.change(tmp_path, {"MEMORY.md": lambda t: add_line(t, f"fact {n}", 50_000)}, "t")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(remember, range(40)))
    lines = (tmp_path / "memory" / "MEMORY.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"- fact {n}" for n in range(40))
    assert len(versions.log(tmp_path)) == 40


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("NO_CHANGE", {}),
        ("no idea", {}),
        ("=== MEMORY.md\n- a\n=== USER.md\n- b\n", {"MEMORY.md": "- a\n", "USER.md": "- b\n"}),
        ("=== USER.md\n" + "- x\n" * 400, {"USER.md": ("- x\n" * 166).rstrip() + "\n"}),
        ("=== SOUL.md\nnope", {}),
    ],
)
def test_parse_reply(answer: str, want: dict[str, str]) -> None:
    assert parse_reply(answer, 666) == want
