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


def encoded_files(paths: list[Path]) -> list[dict[str, str]]:
    """The files as the control API's ``files`` (base64, docs/media.md), for a turn run in
    the gateway; exits 1 when together they are past the chat route's body cap."""
    import mimetypes

    from vikingbot.bus.sent_files import encode_file
    from vikingbot.gateway.bodycap import FILES_LIMIT

    budget = FILES_LIMIT * 3 // 4 - 200_000  # base64 adds a third; room for the text
    total = sum(p.stat().st_size for p in paths)
    if total > budget:
        fail(
            f"--attach: the files are {total / 1_000_000:.1f} MB together; a chat message "
            f"to the gateway carries at most {budget / 1_000_000:.1f} MB of files"
        )
    return [encode_file(p.name, p.read_bytes(), mimetypes.guess_type(p.name)[0]) for p in paths]


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
