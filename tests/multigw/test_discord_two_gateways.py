"""Discord with two real gateway processes on one home and one PostgreSQL schema.

Discord sends every event to each gateway session a bot has open, so of several
gateways only the one holding the channel's lease may open one (``exclusive_inbound``):
exactly one session is open, a person's message is answered once, and when the
holder stops the other gateway opens the session and answers the next message once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import SharedDb
from tests.support.fake_discord import FakeDiscord
from tests.support.gateway_proc import GatewayProcess, both_started, write_shared_home
from tests.support.home import poll
from vikingbot.testing.fake_openai import FakeOpenAI

ALICE, DM = "111111111111111111", "333333333333333333"
KEY = "discord:default"  # the channel's lease as /health lists it


@pytest.fixture
def discord_home(
    pg_schema: SharedDb, tmp_path: Path
) -> Iterator[tuple[Path, FakeDiscord, FakeOpenAI]]:
    discord = FakeDiscord()
    with FakeOpenAI.start() as llm, discord.serve() as api:
        home = write_shared_home(
            tmp_path / "home",
            pg_schema.config_url,
            llm_url=llm.base_url,
            owner=f"discord:{DM}",
            channels={
                "discord": {
                    "enabled": True,
                    "token": discord.token,
                    "api_base": api,
                    "allow_from": [ALICE],
                }
            },
            heartbeat={"enabled": False},  # only chat turns reach the model here
            # a 3 s lease: the standby tries to claim the channel every second
            gateway={"shutdown_grace_s": 2, "lease_s": 3},
        )
        yield home, discord, llm


def holders(gw: GatewayProcess) -> list[str] | None:
    """The ids of the running gateways holding the Discord lease, as ``gw`` lists
    them; None until some gateway holds it."""
    running = [p for p in gw.get("/health")["gateways"] if p["state"] == "running"]
    found = [p["id"] for p in running if KEY in p["channels"]]
    return found or None


def ask(discord: FakeDiscord, text: str, answers: int) -> list[dict[str, Any]]:
    """Alice says ``text`` in her DM; the bot's messages once there are ``answers``."""
    discord.push_message(channel_id=DM, user_id=ALICE, text=text)
    return poll(lambda: len(discord.sent) >= answers and list(discord.sent), "the answer", 30)


def test_one_gateway_holds_discord_answers_once_and_the_other_takes_over(
    discord_home: tuple[Path, FakeDiscord, FakeOpenAI],
) -> None:
    home, discord, llm = discord_home
    llm.script(["Sunny all day.", "Bring an umbrella."])
    with both_started(home) as (a, b):
        ids = {a.get("/health")["gateway_id"]: a, b.get("/health")["gateway_id"]: b}
        poll(
            lambda: len([p for p in a.get("/health")["gateways"] if p["state"] == "running"]) == 2,
            "both gateways listed as running",
            30,
        )
        (holder_id,) = poll(lambda: holders(a), "a gateway holding the Discord lease", 30)
        assert holders(b) == [holder_id]  # both see the same single holder
        other_id = next(i for i in ids if i != holder_id)
        holder, other = ids[holder_id], ids[other_id]
        poll(lambda: discord.sessions, "the holder's Discord gateway session", 30)
        assert discord.sessions == 1  # the standby signed in but opened no session

        sent = ask(discord, "weather today?", 1)
        assert [(m["channel_id"], m["content"]) for m in sent] == [(DM, "Sunny all day.")]

        opened = len(discord.identified)
        holder.stop()  # a clean stop: the session closes and the lease is released
        assert holder.returncode == 0, holder.output[-4000:]
        poll(lambda: holders(other) == [other_id], "the other gateway taking the lease", 30)
        # Discord does not replay what was said while no session was open: wait for it
        poll(lambda: len(discord.identified) > opened, "the survivor's Discord session", 30)
        assert discord.sessions == 1

        sent = ask(discord, "and tomorrow?", 2)
        assert (sent[1]["channel_id"], sent[1]["content"]) == (DM, "Bring an umbrella.")
    # both gateways have exited: whatever either would ever send or ask has happened
    assert [m["content"] for m in discord.sent] == ["Sunny all day.", "Bring an umbrella."]
    assert discord.posts == 2  # not a second send of one answer (deduplicated by its nonce)
    assert [r.last_user_text for r in llm.requests] == ["weather today?", "and tomorrow?"]
    assert discord.most_sessions == 1  # never two Discord sessions at once
