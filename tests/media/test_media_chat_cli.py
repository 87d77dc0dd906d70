"""`vikingbot chat -m ... --attach FILE` through the real CLI against the fake model servers."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner, Result

from tests.media.conftest import photo
from tests.support.fake_transcription import FakeTranscription
from vikingbot.cli.app import app
from vikingbot.session.store import SessionStore
from vikingbot.testing.fake_openai import FakeOpenAI, reply


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("VIKINGBOT_HOME", str(home))
    for var in ("VIKINGBOT_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def llm(fake_openai: FakeOpenAI) -> FakeOpenAI:
    return fake_openai


def configure(home: Path, base_url: str, model: str = "gpt-4o", **bot: Any) -> None:
    kind = "anthropic" if "claude" in model else "openai"
    (home / "config.json").write_text(
        json.dumps(
            {
                "bot": {
                    "agents": {"provider": kind, "model": model},
                    "providers": {kind: {"apiBase": base_url, "apiKey": "sk-test"}},
                    **bot,
                }
            }
        )
    )


def chat(*args: str) -> Result:
    return CliRunner().invoke(app, ["chat", *args])


def history(home: Path) -> list[Any]:
    return SessionStore(home / "data" / "sessions").read_messages("cli:default:local")


def inbox(home: Path) -> list[Path]:
    return sorted(home.rglob("inbox/*"))


def test_a_picture_reaches_an_openai_model_as_an_image_url_part(
    home: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    configure(home, llm.base_url)
    llm.script([reply("A whiteboard with circles.")])
    board = tmp_path / "board.jpg"
    board.write_bytes(photo(2400, 1800))
    result = chat("-m", "what is on the board?", "--attach", str(board))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "A whiteboard with circles.\n"
    content = llm.requests[0].messages[-1]["content"]
    assert content[0]["type"] == "text" and content[0]["text"].startswith("what is on the board?")
    url = content[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    sent = base64.b64decode(url.split(",", 1)[1])
    assert len(sent) <= 800_000
    with Image.open(io.BytesIO(sent)) as im:
        assert im.width * im.height <= 1_150_000
    (kept,) = inbox(home)
    assert kept.name.endswith("-board.jpg") and kept.read_bytes() == board.read_bytes()
    assert f"inbox/{kept.name}" in history(home)[0].content  # the tools can find it again


def test_a_voice_note_is_heard_echoed_and_kept_in_history_as_audio(
    home: Path, llm: FakeOpenAI, voice_note: Path
) -> None:
    with FakeTranscription.start(text="water the plants at six") as stt:
        configure(home, llm.base_url, transcription={"apiBase": stt.base_url})
        llm.script([reply("I will remind you.")])
        result = chat("-m", "", "--attach", str(voice_note))
    assert result.exit_code == 0, result.stderr
    assert '🎙 I heard: "water the plants at six"' in result.stderr
    assert llm.requests[0].last_user_text.startswith(
        "[voice note, transcribed] water the plants at six"
    )
    said = history(home)[0]
    assert said.metadata.get("via") == "audio"


def test_a_missing_file_is_a_usage_error(home: Path, llm: FakeOpenAI, tmp_path: Path) -> None:
    configure(home, llm.base_url)
    result = chat("-m", "hi", "--attach", str(tmp_path / "nope.jpg"))
    assert result.exit_code == 2
    assert "nope.jpg: no such file" in result.stderr
    assert llm.requests == []
