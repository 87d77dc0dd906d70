"""`vikingbot chat --attach FILE` with a gateway running: the files travel in the control
API's chat call and the turn runs in the gateway, the picture reaching the model there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.media.conftest import photo
from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import TIMEOUT_S, Home
from vikingbot.testing.fake_openai import FakeOpenAI, reply


@pytest.fixture
def gw_home(tmp_path: Path) -> Iterator[Home]:
    telegram = FakeTelegram()
    with FakeOpenAI.start() as llm, telegram.serve() as api:
        home = Home(tmp_path / "home", llm, telegram, api)
        home.write_config(agents={"provider": "openai", "model": "gpt-4o"})
        yield home


def test_attached_files_go_to_the_gateway_and_the_picture_reaches_its_model(
    gw_home: Home, tmp_path: Path
) -> None:
    board = tmp_path / "board.jpg"
    board.write_bytes(photo(1600, 1200))
    tool = tmp_path / "setup.exe"
    tool.write_bytes(b"MZ" + b"\0" * 200)
    gw_home.llm.script([reply("A whiteboard with circles.")])
    gw = GatewayProcess(gw_home.path, start_timeout_s=TIMEOUT_S).start()
    try:
        res = gw_home.cli(
            "chat", "-m", "what is on the board?", "--json",
            "--attach", str(board), "--attach", str(tool),
        )  # fmt: skip
    finally:
        gw.stop()
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["via"] == "gateway" and out["reply"] == "A whiteboard with circles."
    assert "I cannot take a .exe file (setup.exe)" in res.stderr  # told, and the turn went on
    (req,) = gw_home.llm.requests
    content = req.messages[-1]["content"]
    assert content[0]["text"].startswith("what is on the board?")
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    (kept,) = sorted(gw_home.data.rglob("inbox/*"))  # the gateway kept the original
    assert kept.name.endswith("-board.jpg") and kept.read_bytes() == board.read_bytes()
