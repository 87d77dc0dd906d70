"""Laying out `heartbeat plan --all` for 10,000 decisions at 80 columns: cli/tables.py
beside Rich's ``Table`` (what the heartbeat commands used before), in the same run.

The rows are what a home with 10,000 stale chat sessions prints: each with the
session key and the fix text of its skip (so every detail wraps at 80 columns).
Both render into memory at width 80; the figure is the wall time of the layout
and text, median of ``--runs`` (default 3). Rich is timed on ``--rich-rows``
(default 2,000) and scaled to 10,000 when fewer, to keep the run short; the
printed line says so.

    uv run --dev python bench/cli_tables.py [--rows 10000] [--runs 3] [--rich-rows 2000]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

from vikingbot.cli.tables import Col, render

DETAIL = (
    "no message in telegram:default:{i} for over 2d (bot.heartbeat.stale_after): "
    "write in it, or raise stale_after"
)


def rows(n: int) -> list[list[str]]:
    return [
        [f"ws-{i % 97}", f"telegram:default:{i}", "skip", "stale", DETAIL.format(i=i)]
        for i in range(n)
    ]


COLS = [
    Col("workspace", merge=True),
    Col("session or entry", wrap=True),
    Col("decision"),
    Col("reason"),
    Col("detail", wrap=True),
]


def ours(data: list[list[str]]) -> float:
    t0 = time.perf_counter()
    text = render("Heartbeat plan", COLS, list(data), width=80)
    elapsed = time.perf_counter() - t0
    assert "…" not in text and max(len(x) for x in text.splitlines()) <= 80
    return elapsed


def rich(data: list[list[str]]) -> float:
    from rich.console import Console
    from rich.table import Table

    t0 = time.perf_counter()
    table = Table(title="Heartbeat plan")
    for c in ("workspace", "session", "decision", "reason", "detail"):
        table.add_column(c)
    for r in data:
        table.add_row(*r)
    Console(file=io.StringIO(), width=80).print(table)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rich-rows", type=int, default=2_000)
    args = ap.parse_args()
    data = rows(args.rows)
    mine = statistics.median(ours(data) for _ in range(args.runs))
    rich_n = min(args.rich_rows, args.rows)
    theirs = statistics.median(rich(data[:rich_n]) for _ in range(args.runs))
    scaled = theirs * args.rows / rich_n
    print(f"plan --all layout, {args.rows} rows at 80 columns, median of {args.runs}:")
    print(f"  cli/tables.py  {mine:8.3f} s")
    note = "" if rich_n == args.rows else f" (measured on {rich_n} rows, scaled)"
    print(f"  rich Table     {scaled:8.3f} s{note}")


if __name__ == "__main__":
    main()
