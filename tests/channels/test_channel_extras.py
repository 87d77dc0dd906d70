"""A channel whose extra is not installed says which extra to install, wherever it is
loaded (gateway, `channels status`, doctor), instead of an import error at start."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vikingbot import registry
from vikingbot.cli.channels_cmd import channel_rows
from vikingbot.config.schema import Config
from vikingbot.errors import NotConfiguredError


@pytest.fixture
def plugin_without_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution whose channel needs the 'fancy' extra, whose package is missing."""
    site = tmp_path / "site"
    dist = site / "fancychan-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fancychan\nVersion: 0.1.0\n"
        "Provides-Extra: fancy\n"
        'Requires-Dist: no-such-package-for-vikingbot>=1; extra == "fancy"\n'
    )
    (dist / "entry_points.txt").write_text(
        "[vikingbot.channels]\nfancy = fancychan:FancyChannel [fancy]\n"
    )
    (site / "fancychan.py").write_text(
        "from vikingbot.channels.base import Channel\n\n"
        "class FancyChannel(Channel):\n    name = 'fancy'\n"
    )
    monkeypatch.syspath_prepend(str(site))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()
    sys.modules.pop("fancychan", None)


def test_starting_names_the_extra(plugin_without_its_extra: None) -> None:
    registry.load("channels", "fancy")  # its settings can still be read (config loads)
    with pytest.raises(NotConfiguredError) as caught:
        registry.load_ready("channels", "fancy")  # what the gateway starts through
    assert "pip install 'fancychan[fancy]'" in str(caught.value)
    assert "uv sync" not in str(caught.value)  # another distribution's extra: not a clone's


def test_channels_status_names_the_extra(plugin_without_its_extra: None) -> None:
    config = Config.model_validate({"bot": {"channels": {"fancy": {"enabled": True}}}})
    row = next(r for r in channel_rows(config) if r["name"] == "fancy")
    assert any("needs the 'fancy' extra" in note for note in row["notes"])


def test_installed_extras_are_not_flagged() -> None:
    for name in ("slack", "telegram"):
        assert registry.missing_extra("channels", name) is None  # the suite has all extras
    assert registry.missing_extra("channels", "cli") is None  # no extra declared
