"""Hints name the command as the user typed it (issue 42): `uv run vikingbot ...` in a
clone, `vikingbot ...` from the PATH, the interpreter's `-m vikingbot` otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.cli.typed import typed


def test_under_uv_run() -> None:
    env = {"UV_RUN_RECURSION_DEPTH": "1"}
    assert typed("gateway", argv=["/c/.venv/bin/vikingbot"], environ=env) == (
        "uv run vikingbot gateway"
    )
    assert typed("gateway", argv=["/c/vikingbot/__main__.py"], environ=env) == (
        "uv run python -m vikingbot gateway"
    )


def test_from_the_path_or_a_full_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "bin" / "vikingbot"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(script.parent))
    assert typed("chat", argv=[str(script)], environ={}) == "vikingbot chat"
    other = tmp_path / "venv" / "vikingbot"
    assert typed("chat", argv=[str(other)], environ={}) == f"{other} chat"
    assert typed("chat", argv=["-m"], environ={}, executable="/py") == "/py -m vikingbot chat"
