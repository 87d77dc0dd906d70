"""A heartbeat entry that names a picture in its own workspace shows it to the model;
a path out of the workspace is never read (docs/media.md, "Unattended turns")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.media.conftest import photo
from tests.support.harness import Harness, build_harness, make_config, with_tasks
from vikingbot.media.workspace_images import inside, named_images
from vikingbot.testing.fake_openai import FakeOpenAI, reply


@pytest.fixture
async def seeing(tmp_path: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    config = make_config(fake_openai.base_url)
    config.bot.agents.vision = "on"
    async for h in build_harness(tmp_path, fake_openai, config):
        yield h


async def test_an_entry_shows_its_workspace_picture_and_never_one_outside(
    seeing: Harness, tmp_path: Path
) -> None:
    ws = seeing.workspace()
    (ws / "inbox").mkdir()
    (ws / "inbox" / "board.jpg").write_bytes(photo(640, 480))
    (tmp_path / "secret.png").write_bytes(photo(64, 64, "PNG"))
    (ws / "inbox" / "link.png").symlink_to(tmp_path / "secret.png")
    seeing.user_session()
    seeing.write(
        with_tasks(
            "- Describe `inbox/board.jpg`, then ../../../secret.png, /etc/x.png and inbox/link.png"
        )
    )
    seeing.fake.script([reply("HEARTBEAT_OK")])
    await seeing.cycle()
    (req,) = seeing.fake.requests
    content = req.messages[-1]["content"]
    shown = [p for p in content if p.get("type") == "image_url"]
    assert len(shown) == 1 and shown[0]["image_url"]["url"].startswith("data:image/jpeg")
    text = content[0]["text"]
    assert "[image inbox/board.jpg is shown to you with this message]" in text
    assert "[../../../secret.png: not shown, it is outside this workspace]" in text
    assert "[/etc/x.png: not shown, it is outside this workspace]" in text
    assert "[inbox/link.png: not shown, it is outside this workspace]" in text


async def test_without_a_named_picture_the_turn_stays_text_only(seeing: Harness) -> None:
    seeing.user_session()
    seeing.write(with_tasks("- Check whether the build is green"))
    seeing.fake.script([reply("HEARTBEAT_OK")])
    await seeing.cycle()
    (req,) = seeing.fake.requests
    assert isinstance(req.messages[-1]["content"], str)


def test_named_images_reads_words_not_urls(tmp_path: Path) -> None:
    text = "see (inbox/a.JPG), 'b.png'. https://x.org/c.png d.pdf inbox/a.JPG"
    assert named_images(text) == ["inbox/a.JPG", "b.png"]
    assert inside(tmp_path, "../x.png") is None and inside(tmp_path, "C:/x.png") is None
    assert inside(tmp_path, "inbox/../a.png") == (tmp_path / "a.png").resolve()
