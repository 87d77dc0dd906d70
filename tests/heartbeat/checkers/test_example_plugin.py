"""The example plugin in ``examples/`` declares and implements a working checker kind."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from vikingbot.config.schema import CheckerConfig
from vikingbot.heartbeat.checkers import Checker

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vikingbot-checker-example"


@pytest.fixture
def plugin_class(monkeypatch: pytest.MonkeyPatch) -> type[Checker]:
    """The class the example's entry point names, imported as an installed plugin would be."""
    pyproject = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    entry_points = pyproject["project"]["entry-points"]["vikingbot.checkers"]
    assert list(entry_points) == ["disk-space"]
    module_name, _, attr = entry_points["disk-space"].partition(":")
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    cls = getattr(importlib.import_module(module_name), attr)
    assert issubclass(cls, Checker)
    return cls


def build(cls: type[Checker], tmp_path: Path, **options: object) -> Checker:
    config = CheckerConfig.model_validate({"kind": "disk-space", **options})
    checker = cls("disk", config, state_dir=tmp_path, environ={})
    checker.validate()
    return checker


async def test_the_example_reports_low_space(plugin_class, tmp_path: Path) -> None:
    low = await build(plugin_class, tmp_path, path=str(tmp_path), minFreePercent=100).check(None)
    fine = await build(plugin_class, tmp_path, path=str(tmp_path), min_free_percent=0).check(None)
    assert low.has_work and "free on" in (low.context or "")
    assert not fine.has_work
    assert low.signature != fine.signature


def test_the_example_validates_its_options(plugin_class, tmp_path: Path) -> None:
    from vikingbot.errors import CheckerError

    with pytest.raises(CheckerError, match="min_free_percent"):
        build(plugin_class, tmp_path, min_free_percent=150)
    with pytest.raises(CheckerError, match="unknown option 'treshold'"):
        build(plugin_class, tmp_path, treshold=5)
