"""Every hint to install an extra keeps the extras installed (issue 42): a clone's
`uv sync` names them all (uv removes what a sync does not name), a `uv tool` install
is reinstalled with all of them, pip gets them in one bracket."""

from __future__ import annotations

from pathlib import Path

import pytest

from vikingbot.extras import Install, here, install_command

ALL = ("acp", "discord", "email", "feishu", "matrix", "otel", "postgres", "slack", "telegram")


@pytest.mark.parametrize(
    ("install", "wanted", "command"),
    [
        (Install("clone", Path("/c"), ALL, ()), "email", "uv sync --extra email"),
        (
            Install("clone", Path("/c"), ALL, ("telegram", "postgres")),
            "email",
            "uv sync --extra email --extra postgres --extra telegram",
        ),
        # already there (a hint for a broken install): the same list, nothing dropped
        (Install("clone", Path("/c"), ALL, ("telegram",)), "telegram", "uv sync --extra telegram"),
        (Install("clone", Path("/c"), ALL, ALL[:-1]), "telegram", "uv sync --all-extras"),
        (
            Install("tool", Path("/src/vb"), ALL, ("slack",)),
            "email",
            "uv tool install --reinstall -e '/src/vb[email,slack]'",
        ),
        (Install("tool", None, ALL, ()), "email", "uv tool install --reinstall -e '.[email]'"),
        (Install("pip", None, ALL, ("slack",)), "matrix", "pip install 'vikingbot[matrix,slack]'"),
    ],
)
def test_the_command_keeps_what_is_installed(install: Install, wanted: str, command: str) -> None:
    assert install_command(install, wanted) == command


def test_this_clone_is_seen_as_a_clone_with_every_extra() -> None:
    """The suite runs in the clone's .venv after `uv sync --all-extras`; the default
    install's mcp and notify are no extras to name."""
    found = here()
    assert found.kind == "clone"
    assert found.source == Path(__file__).resolve().parents[2]
    assert set(found.installed) == set(ALL) and "mcp" not in found.declared
    assert install_command(found, "email") == "uv sync --all-extras"
