"""Taking in a message's files: caps, inbox/, images, voice notes, documents, refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.media.conftest import photo, silence
from tests.support.fake_transcription import FakeTranscription
from vikingbot.bus import Attachment
from vikingbot.clock import FakeClock
from vikingbot.config.schema import Config
from vikingbot.media import MediaIntake, Taken
from vikingbot.store.db import StateStore

NOW = datetime(2026, 12, 6, 20, 30, 12, tzinfo=UTC)


def given(name: str, data: bytes, **kw: Any) -> tuple[Attachment, list[int]]:
    """An attachment whose download hands ``data``; the list records each fetch's limit."""
    calls: list[int] = []

    async def fetch(limit: int) -> bytes:
        calls.append(limit)
        return data

    return Attachment(name, fetch, **kw), calls


def config(**bot: Any) -> Config:
    agents = {"provider": "openai", "model": "gpt-4o-mini", **bot.pop("agents", {})}
    return Config.model_validate({"bot": {"agents": agents, **bot}})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path / 'state.db'}") as st:
        yield st


async def take(
    tmp_path: Path, cfg: Config, *atts: Attachment, store: StateStore | None = None
) -> Taken:
    intake = MediaIntake(lambda: cfg, clock=FakeClock(NOW), store=store, environ={})
    return await intake.take(
        atts, workspace=tmp_path / "ws", chat="telegram:default:42", sender="42", source="telegram"
    )


async def test_a_photo_is_kept_in_inbox_and_shown_to_a_model_that_sees(tmp_path: Path) -> None:
    data = photo(2000, 1500)
    att, _ = given("IMG 0001.jpg", data, mime="image/jpeg")
    taken = await take(tmp_path, config(), att)
    kept = tmp_path / "ws/inbox/20261206-203012-IMG-0001.jpg"
    assert kept.read_bytes() == data  # the original, under a dated name
    assert len(taken.images) == 1 and len(taken.images[0].data) < len(data)
    prompt = taken.prompt("what is on the board?")
    assert prompt.startswith("what is on the board?\n[image received: inbox/20261206-203012-")
    assert taken.notices == []


async def test_a_model_that_does_not_see_gets_the_caption_and_the_user_is_told_once(
    tmp_path: Path,
) -> None:
    cfg = config(agents={"model": "deepseek-chat"})
    intake = MediaIntake(lambda: cfg, clock=FakeClock(NOW), environ={})
    seen: list[Taken] = []
    for _ in range(2):
        att, _ = given("p.png", photo(40, 30, "PNG"))
        seen.append(
            await intake.take(
                [att], workspace=tmp_path, chat="telegram:default:42", sender="42", source="t"
            )
        )
    assert seen[0].images == [] and seen[1].images == []
    assert "does not see images" in seen[0].notices[0]
    assert seen[1].notices == []  # told once per chat
    assert "this model does not see it" in seen[1].prompt("look")


async def test_vision_on_and_off_override_the_list(tmp_path: Path) -> None:
    att, _ = given("p.png", photo(40, 30, "PNG"))
    on = await take(tmp_path, config(agents={"model": "my-local-thing", "vision": "on"}), att)
    off = await take(tmp_path, config(agents={"model": "gpt-4o", "vision": "off"}), att)
    assert len(on.images) == 1 and off.images == []


async def test_a_pdf_is_saved_and_the_turn_told_its_name_and_size(tmp_path: Path) -> None:
    att, _ = given("Q3 report.pdf", b"%PDF-1.4\n" + b"x" * 2000, mime="application/pdf")
    taken = await take(tmp_path, config(), att)
    assert taken.lines == [
        "[file received: inbox/20261206-203012-Q3-report.pdf (2.0 KB); read it with read_file]"
    ]


async def test_refusals_are_one_line_each_audited_and_the_rest_goes_on(
    tmp_path: Path, store: StateStore
) -> None:
    big, big_calls = given("huge.jpg", b"", size=30_000_000)
    exe, _ = given("setup.exe", b"MZ\x90\x00" + b"\x00" * 100)
    cut, _ = given("cut.jpg", photo(400, 300)[:500])

    async def unreachable(limit: int) -> bytes:
        raise OSError("connection refused by 127.0.0.1:9")

    gone = Attachment("gone.jpg", unreachable)
    fine, _ = given("fine.png", photo(40, 30, "PNG"))
    taken = await take(tmp_path, config(), big, exe, cut, gone, fine, store=store)
    assert big_calls == []  # over the cap as declared: never downloaded
    assert taken.refused == ["too-big", "unsupported", "corrupt", "download-failed"]
    assert taken.notices[0] == "huge.jpg is 30.0 MB, over the 25.0 MB limit for a file"
    assert "I cannot take a .exe file (setup.exe)" in taken.notices[1]
    assert taken.notices[2].startswith("cut.jpg is damaged or cut short")
    assert "could not download gone.jpg from telegram: connection refused" in taken.notices[3]
    assert len(taken.images) == 1  # the good one still goes through
    audited = store.audit_events(action="media.refuse")
    assert sorted(e["reason"] for e in audited) == sorted(taken.refused)
    assert not list((tmp_path / "ws/inbox").glob("*exe*"))  # nothing unsupported kept


async def test_a_download_that_hangs_is_refused_after_the_timeout(tmp_path: Path) -> None:
    async def hang(limit: int) -> bytes:
        await asyncio.Event().wait()
        return b""

    cfg = config(media={"download_timeout_s": 0.2})
    taken = await take(tmp_path, cfg, Attachment("slow.jpg", hang))
    assert taken.refused == ["download-failed"]
    assert "no answer within 0.2s" in taken.notices[0]


async def test_more_files_than_the_cap_are_left_with_one_line(tmp_path: Path) -> None:
    atts = [given(f"n{i}.txt", b"note", mime="text/plain")[0] for i in range(4)]
    taken = await take(tmp_path, config(media={"max_files": 2}), *atts)
    assert len(taken.lines) == 2
    assert taken.notices == ["I take 2 files per message; the rest were left"]


async def test_a_voice_note_is_transcribed_and_the_words_become_the_message(
    tmp_path: Path, voice_note: Path
) -> None:
    with FakeTranscription.start(text=" Please water the plants at six. ") as fake:
        cfg = config(transcription={"api_base": fake.base_url, "api_key": "sk-voice"})
        att, _ = given("voice.ogg", voice_note.read_bytes(), kind="audio", duration_s=2)
        taken = await take(tmp_path, cfg, att)
    assert taken.transcript == "Please water the plants at six."
    assert taken.notices == ['🎙 I heard: "Please water the plants at six."']
    assert taken.prompt("").startswith("[voice note, transcribed] Please water the plants")
    sent = fake.received[0]
    assert sent.fields["model"] == "whisper-1"
    assert sent.data == voice_note.read_bytes()  # OGG is taken as is: no conversion
    assert sent.authorization == "Bearer sk-voice"


async def test_audio_the_endpoint_does_not_take_is_converted_with_ffmpeg(
    tmp_path: Path, voice_note: Path
) -> None:
    with FakeTranscription.start() as fake:
        cfg = config(transcription={"api_base": fake.base_url, "formats": ["wav"]})
        att, _ = given("voice.ogg", voice_note.read_bytes(), kind="audio")
        taken = await take(tmp_path, cfg, att)
    assert taken.transcript is not None
    assert fake.received[0].filename == "voice.wav"
    assert fake.received[0].data[:4] == b"RIFF" and fake.received[0].data[8:12] == b"WAVE"


async def test_a_failed_transcription_says_why_and_keeps_the_audio(
    tmp_path: Path, voice_note: Path, store: StateStore
) -> None:
    with FakeTranscription.start(fail_with=503) as fake:
        cfg = config(
            transcription={"api_base": fake.base_url}, providers={"openai": {"max_retries": 0}}
        )
        att, _ = given("voice.ogg", voice_note.read_bytes(), kind="audio")
        taken = await take(tmp_path, cfg, att, store=store)
    assert taken.transcript is None and taken.refused == ["transcription-failed"]
    assert "answered 503" in taken.notices[0]
    assert "the audio is kept as inbox/20261206-203012-voice.ogg" in taken.notices[0]
    assert (tmp_path / "ws/inbox/20261206-203012-voice.ogg").exists()


async def test_empty_and_overlong_audio_and_no_endpoint_are_refused(tmp_path: Path) -> None:
    zero = silence(tmp_path, 0, "zero.ogg")
    long = silence(tmp_path, 8, "long.ogg")
    cfg = config(transcription={"api_base": "http://127.0.0.1:9/v1", "max_seconds": 5})
    a, _ = given("zero.ogg", zero.read_bytes(), kind="audio")
    b, _ = given("long.ogg", long.read_bytes(), kind="audio")
    taken = await take(tmp_path, cfg, a, b)
    assert taken.refused == ["empty-audio", "too-long"]
    unset = await take(tmp_path, config(), given("v.ogg", long.read_bytes(), kind="audio")[0])
    assert unset.refused == ["no-transcription"]
    assert "bot.transcription" in unset.notices[0] and "kept as inbox/" in unset.notices[0]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("noise.ogg", bytes(range(256)) * 40),  # no container at all
        ("cut.ogg", b"OggS\x00\x02" + b"\x00" * 40),  # an OGG page header and nothing
        ("voice.mp3", b"ID3\x04\x00\x00\x00\x00\x00\x00"),  # a tag and no frames
    ],
)
async def test_broken_audio_is_refused_in_one_line_and_kept(
    tmp_path: Path, name: str, data: bytes
) -> None:
    cfg = config(transcription={"api_base": "http://127.0.0.1:9/v1"})
    taken = await take(tmp_path, cfg, given(name, data, kind="audio")[0])
    assert taken.refused in (["corrupt"], ["empty-audio"]), taken.notices
    assert "the audio is kept as inbox/" in taken.notices[0]


async def test_a_workspace_that_cannot_be_written_is_one_line_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws/inbox").write_text("a file where the folder should be")
    att, _ = given("p.png", photo(40, 30, "PNG"))
    taken = await take(tmp_path, config(), att)
    assert taken.refused == ["not-kept"]
    assert taken.notices[0].startswith("I could not save p.png in the workspace: ")
