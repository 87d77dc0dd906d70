"""Telegram media in, end to end: python-telegram-bot polls the fake Bot API, the gateway's
dispatcher takes the files in (getFile + the file download), the fake model sees them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from tests.media.conftest import photo
from tests.support.fake_telegram import FakeTelegram
from tests.support.fake_transcription import FakeTranscription
from tests.support.harness import Harness, build_harness, make_config
from vikingbot.channels.telegram import TelegramChannel, TelegramSettings
from vikingbot.gateway.supervisor import Gateway
from vikingbot.testing.fake_openai import FakeOpenAI, reply

OWNER, STRANGER = 42, 99


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_photos_and_voice_notes_from_telegram_reach_the_model(
    tmp_path: Path, voice_note: Path
) -> None:
    tg = FakeTelegram(max_poll_s=0.2)
    with (
        FakeOpenAI.start(default=reply("got it")) as llm,
        FakeTranscription.start(text="remind me to call mum") as stt,
        tg.serve() as api,
    ):
        config = make_config(llm.base_url)
        config.bot.agents.vision = "on"
        config.bot.transcription.api_base = stt.base_url
        async for h in build_harness(tmp_path, llm, config):
            await run(h, tg, api, llm, stt, voice_note)


async def run(
    h: Harness, tg: FakeTelegram, api: str, llm: FakeOpenAI, stt: FakeTranscription, voice: Path
) -> None:
    settings = TelegramSettings.model_validate(
        {"enabled": True, "token": tg.token, "apiBase": api, "allowFrom": [str(OWNER)]}
    )
    channel = TelegramChannel(settings, store=h.rt.store)
    gw = Gateway(h.rt, say=lambda _line: None)
    await channel.start(h.rt.bus)
    serving = asyncio.create_task(gw.dispatch.serve_inbound(h.rt.bus, gw.stop_event))
    try:
        # a stranger's photo: ignored before any download
        tg.push_file(chat_id=STRANGER, user_id=STRANGER, kind="photo", data=photo(640, 480))
        tg.push_file(
            chat_id=OWNER, user_id=OWNER, kind="photo", data=photo(1280, 960), caption="my desk"
        )
        await until(lambda: len(h.sent) >= 1, "the answer to the photo")
        assert tg.downloads == ["file-2"]  # the owner's largest size only; never file-1
        content = llm.requests[0].messages[-1]["content"]
        assert content[0]["text"].startswith("my desk\n[image received: inbox/")
        assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        assert h.sent[0].text == "got it"

        tg.push_file(chat_id=OWNER, user_id=OWNER, kind="voice", data=voice.read_bytes())
        await until(lambda: len(h.sent) >= 3, "the transcript line and the answer")
        assert [m.text for m in h.sent[1:3]] == ['🎙 I heard: "remind me to call mum"', "got it"]
        assert stt.received[0].data == voice.read_bytes()
        assert llm.requests[1].last_user_text.startswith("[voice note, transcribed] remind me")

        tg.push_file(
            chat_id=OWNER, user_id=OWNER, kind="document", data=b"MZ\x90\x00",
            file_name="tool.exe", mime="application/octet-stream",
        )  # fmt: skip
        await until(lambda: len(h.sent) >= 4, "the refusal")
        assert h.sent[3].text.startswith("I cannot take a .exe file (tool.exe)")
        assert len(llm.requests) == 2  # nothing left to answer: no turn
        audited = h.rt.store.audit_events(action="media.refuse")
        assert [e["reason"] for e in audited] == ["unsupported"]
    finally:
        gw.stop_event.set()
        await asyncio.wait_for(serving, 10)
        await channel.stop()
