"""A new loop is one module plus one entry point: the example in ``examples/`` proves it."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from vikingbot import registry
from vikingbot.config.loader import Paths
from vikingbot.config.schema import Config
from vikingbot.gateway.compose import build_home
from vikingbot.session.types import SessionKey

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vikingbot-loop-example"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example as pip would install it: its module on the path, its entry points in
    a dist-info folder that importlib.metadata finds (nothing of vikingbot patched)."""
    pyproject = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    loops = pyproject["project"]["entry-points"]["vikingbot.loops"]
    site = tmp_path / "site"
    info = site / "vikingbot_loop_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vikingbot-loop-example\nVersion: 0.1.0\n"
    )
    lines = "".join(f"{k} = {v}\n" for k, v in loops.items())
    (info / "entry_points.txt").write_text(f"[vikingbot.loops]\n{lines}")
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    monkeypatch.syspath_prepend(str(site))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()


async def test_the_example_loop_is_found_configured_ready_and_answers(
    installed: None, tmp_path: Path
) -> None:
    # the example is a whole package: its metadata and one module (byte-code that a
    # run without PYTHONDONTWRITEBYTECODE leaves behind is not part of it)
    files = sorted(
        p.relative_to(EXAMPLE).as_posix()
        for p in EXAMPLE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert files == ["pyproject.toml", "src/vikingbot_loop_example/__init__.py"]
    assert "echo" in registry.names("loops")
    config = Config.model_validate({"bot": {"agents": {"loop": "echo"}}})
    home = tmp_path / "home"
    paths = Paths(
        home=home,
        config_file=home / "config.json",
        data_dir=home / "data",
        database_url=f"sqlite:///{home / 'data' / 'state.db'}",
    )
    rt = build_home(config, paths, environ={})
    try:
        assert rt.readiness().ready
        key = SessionKey("cli", "default", "local")
        result = await rt.agent().run_turn("hello", key, {"workspace": str(tmp_path)})
        assert result.text == "echo: hello"
        assert [m.content for m in rt.sessions.read_messages(key)] == ["hello", "echo: hello"]
    finally:
        await rt.aclose()
