"""A channel plug-in needs its module and its entry point, nothing else in vikingbot.

The example in ``examples/vikingbot-channel-example`` is made discoverable the way
``pip install`` would: a ``*.dist-info`` with its ``entry_points.txt`` on
``sys.path``. Config validation, ``channels status``, the channel manager and the
gateway's HTTP routes then find it through the registry.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from tests.support.outbound import send_reply
from vikingbot import registry
from vikingbot.bus import MessageBus
from vikingbot.channels.manager import ChannelManager
from vikingbot.cli.channels_cmd import channel_rows
from vikingbot.config.schema import Config
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vikingbot-channel-example"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    pyproject = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    points = pyproject["project"]["entry-points"]["vikingbot.channels"]
    dist = tmp_path / "site" / "vikingbot_channel_example-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vikingbot-channel-example\nVersion: 0.1.0\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (dist / "entry_points.txt").write_text("[vikingbot.channels]\n" + lines)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()


def jsonl_config(channels_config: Callable[..., Config], **section: Any) -> Config:
    return channels_config(owner="jsonl:me", jsonl={"enabled": True, **section})


def test_the_plugin_section_is_validated_by_the_plugins_own_model(
    installed: None, tmp_path: Path, make_config: Callable[..., Config]
) -> None:
    config = jsonl_config(make_config, path=str(tmp_path / "out.jsonl"), inboundToken="s3")
    section = config.bot.channels.sections()["jsonl"]
    assert type(section).__name__ == "JsonlSettings"
    assert section.path == tmp_path / "out.jsonl"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"jsonl\.pathh: Extra inputs"):
        jsonl_config(make_config, pathh="typo")
    with pytest.raises(ValueError, match=r"unknown channel 'pigeon' \(known: cli, .*jsonl"):
        make_config(pigeon={"enabled": True})


def test_channels_status_asks_the_plugin_what_is_missing(
    installed: None, make_config: Callable[..., Config]
) -> None:
    rows = {row["name"]: row for row in channel_rows(jsonl_config(make_config))}
    assert rows["jsonl"]["enabled"] is True
    assert rows["jsonl"]["missing"] == ["path"]
    assert rows["jsonl"]["notes"] == ["no inbound_token: inbound is off"]
    assert rows["jsonl"]["owner_chat"] == "me"


async def test_the_plugin_sends_and_receives_through_the_gateways_parts(
    installed: None, tmp_path: Path, store: Any, bus: MessageBus, make_config: Callable[..., Config]
) -> None:
    out = tmp_path / "out.jsonl"
    config = jsonl_config(make_config, path=str(out), inboundToken="s3")
    manager = ChannelManager(config, bus=bus, store=store, retry_delay_s=0.01)
    await manager.start()
    try:
        assert await send_reply(manager, OutboundMessage("jsonl", "me", "**hi**", dedupe_key="p-1"))
        assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["**hi**"]
        app = Starlette(routes=manager.routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            body = {"sender_id": "me", "chat_id": "me", "text": "status?"}
            refused = await client.post("/jsonl/inbound", json=body)
            taken = await client.post(
                "/jsonl/inbound", json=body, headers={"Authorization": "Bearer s3"}
            )
        assert (refused.status_code, taken.status_code) == (401, 202)
        inbound = await bus.next_inbound()
        assert (inbound.channel, inbound.chat_id, inbound.text) == ("jsonl", "me", "status?")
    finally:
        await manager.stop()


def test_a_config_file_naming_the_plugin_loads(installed: None, tmp_path: Path) -> None:
    from vikingbot.config.loader import load_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"bot": {"channels": {"jsonl": {"enabled": True, "pathh": 1}}}}))
    with pytest.raises(ConfigError, match=r"bot\.channels: jsonl\.pathh: Extra inputs"):
        load_config(path)


def test_config_get_reads_a_plugin_section(
    installed: None, tmp_path: Path, make_config: Callable[..., Config]
) -> None:
    from vikingbot.config.edit import get_value, to_plain

    config = jsonl_config(make_config, path=str(tmp_path / "o.jsonl"), inboundToken="s3")
    assert get_value(config, "bot.channels.jsonl.path") == tmp_path / "o.jsonl"
    assert to_plain(get_value(config, "bot.channels.jsonl"))["inbound_token"] == "***"
    with pytest.raises(ConfigError, match="unknown key"):
        get_value(config, "bot.channels.matrix")
