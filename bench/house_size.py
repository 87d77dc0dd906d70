"""How big the product is: lines of code, beside a baseline revision in the same run.

Prints, for the working tree and for ``--baseline REV`` (unpacked with ``git archive``):

- product lines: every ``.py`` file under ``vikingbot/`` except the plug-in test kit
  (the files ``vikingbot/testing/`` holds in the working tree);
- lines under ``vikingbot/heartbeat/``;
- the lowest radon maintainability index of any product module, and the modules
  under ``MI_TARGET`` (radon runs from a throwaway environment: ``uvx --from radon``).

    uv run --dev python bench/house_size.py [--baseline 39cd04a]

Targets: every module's maintainability index at least 10.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baseline import unpack

ROOT = Path(__file__).resolve().parents[1]
MI_TARGET = 10.0


class Size(NamedTuple):
    product: int
    heartbeat: int
    lowest_mi: tuple[float, str]
    under_target: list[tuple[float, str]]


def kit_files(tree: Path) -> set[str]:
    return {p.name for p in (tree / "vikingbot" / "testing").glob("*.py")}


def product_files(tree: Path, kit: set[str]) -> list[Path]:
    testing = tree / "vikingbot" / "testing"
    return sorted(
        p for p in (tree / "vikingbot").rglob("*.py") if not (p.parent == testing and p.name in kit)
    )


def lines(paths: list[Path]) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in paths)


def maintainability(paths: list[Path], tree: Path) -> dict[str, float]:
    out = subprocess.run(
        ["uvx", "--quiet", "--from", "radon", "radon", "mi", "-s", "-j", *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = json.loads(out)
    return {
        str(Path(path).relative_to(tree)): float(v["mi"])
        for path, v in found.items()
        if isinstance(v, dict) and "mi" in v
    }


def measure(tree: Path, kit: set[str]) -> Size:
    files = product_files(tree, kit)
    hb = [p for p in files if (tree / "vikingbot" / "heartbeat") in p.parents]
    mi = maintainability(files, tree)
    ranked = sorted((v, k) for k, v in mi.items())
    return Size(lines(files), lines(hb), ranked[0], [r for r in ranked if r[0] < MI_TARGET])


def show(label: str, size: Size) -> None:
    mi, module = size.lowest_mi
    print(
        f"{label:<10} product_lines {size.product:>6}  heartbeat_lines {size.heartbeat:>6}  ",
        end="",
    )
    print(f"lowest_mi {mi:6.2f} ({module})  modules_under_{MI_TARGET:g}: {len(size.under_target)}")
    for v, k in size.under_target:
        print(f"{'':<10}   mi {v:6.2f}  {k}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default="39cd04a", help="git revision to compare with")
    args = ap.parse_args()
    kit = kit_files(ROOT)
    print(f"plug-in test kit (left out of the product): {', '.join(sorted(kit))}")
    with tempfile.TemporaryDirectory() as tmp:
        base = measure(unpack(args.baseline, Path(tmp)), kit)
    now = measure(ROOT, kit)
    show(f"{args.baseline}", base)
    show("now", now)
    print(
        f"product lines {base.product} -> {now.product} ({now.product - base.product:+d}); "
        f"heartbeat/ {base.heartbeat} -> {now.heartbeat} ({now.heartbeat - base.heartbeat:+d})"
    )
    return 0 if not now.under_target else 1


if __name__ == "__main__":
    sys.exit(main())
