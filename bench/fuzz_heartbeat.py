"""Fuzz HEARTBEAT.md parse + plan + due maths, then time the worst full-size files.

Prints: files tried, exceptions (target 0) with the first few examples, and the
worst parse time of a set of pathological files at 256 KiB (target < 1 s),
beside the same files at 64 KiB so a super-linear pattern shows as a ratio
above 4.

    uv run --dev python bench/fuzz_heartbeat.py [--files 200000] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.support
from tests.support.hostile_heartbeat import check_file, hostile_file
from vikingbot.heartbeat.parser import _parse  # uncached: every file is parsed for real

KIB = 1024


def worst_files(size: int) -> dict[str, str]:
    """Files built to hit every scan of the parser as hard as possible at ``size`` bytes."""
    n = size - 64
    return {
        "heading + spaces": "# a" + " " * n + "b",
        "comment openers": "- x <!--" * (n // 8),
        "comment openers on lines": "- x\n  <!--" * (n // 10),
        "deliver tag + spaces": "- x <!-- deliver: a" + " " * n + "b -->",
        "separator + letter": "- " * (n // 2) + "x",
        "key + spaces": "- every:" + " " * n + "x",
        "repeated keys": "- title: a every: " * (n // 18),
        "cron list": "- title: a cron: '" + "1," * (n // 2) + "1 * * * *'",
        "unclosed comment": "<!--" + "\n- a" * (n // 4),
        "65k one-word entries": "- a\n" * (n // 4),
        "duplicate titles": "- title: t every: 1h\n" * (n // 21),
        "continuation lines": "- a\n" + "  b\n" * (n // 4),
        "one long word + colon": "- " + "a" * n + ":",
    }


def timed(text: str) -> float:
    start = time.perf_counter()
    _parse(text)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rnd = random.Random(args.seed)
    found: Counter[str] = Counter()
    examples: dict[str, str] = {}
    start = time.perf_counter()
    for _ in range(args.files):
        text = hostile_file(rnd, max_lines=rnd.choice((6, 24, 80)))
        problem = check_file(text, rnd)
        if problem:
            key = problem[:80]
            found[key] += 1
            examples.setdefault(key, text)
    took = time.perf_counter() - start
    print(f"files tried: {args.files} ({took:.1f} s)")
    print(f"exceptions: {sum(found.values())} (target 0)")
    for key, count in found.most_common(5):
        print(f"  {count} x {key}\n    e.g. {examples[key][:200]!r}")

    worst_name, worst = "", 0.0
    for name, text in worst_files(256 * KIB).items():
        small = min(timed(t) for t in [worst_files(64 * KIB)[name]] * 2)
        full = min(timed(text) for _ in range(2))
        ratio = full / small if small > 0 else float("inf")
        print(
            f"  {name:28s} 256 KiB {full * 1000:8.1f} ms   64 KiB {small * 1000:7.1f} ms  x{ratio:.1f}"
        )
        if full > worst:
            worst_name, worst = name, full
    print(f"worst parse time at 256 KiB: {worst:.3f} s ({worst_name}) (target < 1 s)")


if __name__ == "__main__":
    main()
