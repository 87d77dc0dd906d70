"""Import every module the installed vikingbot wheel ships (run in a venv with no extras).

A module that needs an optional package (an extra) must import it lazily, where it is
used, so that importing the module itself never fails on the base install.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback

import vikingbot


def main() -> int:
    failed = 0
    names = [m.name for m in pkgutil.walk_packages(vikingbot.__path__, "vikingbot.")]
    for name in ["vikingbot", *names]:
        if name == "vikingbot.__main__":
            continue  # runs the CLI
        try:
            importlib.import_module(name)
        except Exception:
            failed += 1
            print(f"FAILED to import {name}:", file=sys.stderr)
            traceback.print_exc()
    print(f"imported {len(names) + 1 - failed} of {len(names) + 1} modules from {vikingbot.__file__}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
