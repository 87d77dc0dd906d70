"""``vikingbot chat --attach FILE``: files sent with the message, taken in as a chat
platform's are (``vikingbot.media``): saved to the workspace's ``inbox/``, pictures
shown to a model that sees, voice notes transcribed, documents named to the turn."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vikingbot.cli.common import fail

if TYPE_CHECKING:
    from rich.console import Console

    from vikingbot.gateway.compose import Home
    from vikingbot.session.types import SessionKey


def check_files(paths: list[Path]) -> list[Path]:
    """The files to attach; exits 2 naming one that is not a readable file."""
    for p in paths:
        if not p.is_file():
            fail(f"--attach {p}: no such file", 2)
    return paths


async def with_files(
    rt: Home, key: SessionKey, paths: list[Path], text: str, err: Console
) -> tuple[str, dict[str, Any]] | None:
    """The prompt and turn metadata for ``text`` with ``paths`` attached; each line the
    person is told (a refusal, what was heard) is printed on ``err``. None: nothing left
    to answer (every file refused and no words)."""
    import asyncio

    from rich.markup import escape

    from vikingbot.gateway.compose import media
    from vikingbot.media.local import file_attachment

    workspace = await asyncio.to_thread(rt.workspaces.workspace_for, key)
    taken = await media(rt).take(
        [file_attachment(p) for p in paths],
        workspace=workspace,
        chat=str(key),
        sender="cli",
        source="cli",
    )
    for line in taken.notices:
        err.print(f"[cyan]{escape(line)}[/]", highlight=False)
    prompt = taken.prompt(text)
    if not prompt.strip():
        return None
    meta: dict[str, Any] = {"images": taken.images} if taken.images else {}
    if taken.transcript is not None:
        meta["via"] = "audio"
    return prompt, meta
