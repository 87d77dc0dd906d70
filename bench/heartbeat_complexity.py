"""Cyclomatic complexity of the heartbeat's functions, before issue 11 and now (radon).

Reads every module of ``vikingbot/heartbeat/`` as it was at a baseline commit
(default: 6bc5795, the state the issue measured) and as it is in the working
tree, and prints, side by side, the largest functions by radon's cyclomatic
complexity with their length in lines. Target: none over 15.

    uv run --dev --with radon python bench/heartbeat_complexity.py [--before 6bc5795] [--top 5]
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "vikingbot/heartbeat"


def sources_at(commit: str | None) -> dict[str, str]:
    if commit is None:
        return {
            str(p.relative_to(ROOT)): p.read_text("utf-8") for p in (ROOT / PACKAGE).rglob("*.py")
        }
    names = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", commit, PACKAGE],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    out = {}
    for name in names:
        if name.endswith(".py"):
            out[name] = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{commit}:{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
    return out


def ranked(sources: dict[str, str]) -> list[tuple[int, int, str]]:
    """(complexity, lines, file:function) of every function and method, largest first."""
    rows = []
    for name, text in sources.items():
        for block in cc_visit(text):
            if type(block).__name__ == "Class":
                continue
            where = f"{Path(name).name}:{getattr(block, 'fullname', block.name)}"
            rows.append((block.complexity, block.endline - block.lineno + 1, where))
    return sorted(rows, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="6bc5795")
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    for label, commit in ((f"before ({args.before})", args.before), ("now (working tree)", None)):
        rows = ranked(sources_at(commit))
        over = [r for r in rows if r[0] > 15]
        print(f"{label}: {len(rows)} functions, {len(over)} over complexity 15")
        for cc, lines, where in rows[: args.top]:
            print(f"  CC {cc:3d}  {lines:4d} lines  {where}")


if __name__ == "__main__":
    main()
