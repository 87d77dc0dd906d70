"""The command a user typed to run vikingbot, for hints that say what to type next.

``uv run vikingbot onboard`` is told ``uv run vikingbot gateway``; ``vikingbot
onboard`` from the PATH is told ``vikingbot gateway``; ``python -m vikingbot`` is
told the same interpreter's ``-m vikingbot``. Pure apart from what it is given.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence


def typed(
    *args: str,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    executable: str | None = None,
) -> str:
    """``args`` after the command that ran this process, as the user would type it."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    first = os.path.basename(argv[0]) if argv else ""
    script = first in ("vikingbot", "vikingbot.exe")
    if environ.get("UV_RUN_RECURSION_DEPTH"):  # set by `uv run` for what it runs
        head = "uv run vikingbot" if script else "uv run python -m vikingbot"
    elif script:
        found = shutil.which("vikingbot")
        same = found is not None and os.path.realpath(found) == os.path.realpath(argv[0])
        head = "vikingbot" if same else argv[0]
    else:
        head = f"{executable or sys.executable} -m vikingbot"
    return " ".join([head, *args])
