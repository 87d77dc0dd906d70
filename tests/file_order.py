"""The order the xdist workers take the test files in: the most costly first.

With ``--dist loadfile`` each file runs on one worker, and a worker is handed the
next file when it is almost out of work. xdist's own order is by number of
tests, most first, which leaves the one-test files last, and those are the
slowest (real gateways killed and restarted, heartbeat intervals waited out):
replayed with a full run's seconds per file, one worker ended 35 s after the
other. Handed out most costly first (longest processing time first), the short
files at the end fill the gaps and the workers finish together (0.5 s apart in
the next full run, on two workers).

The cost of a file is its seconds in ``file_costs.json`` (measured in a
full run; only files of a second or more are listed), else
``SECONDS_PER_TEST`` per test. A stale or missing entry only makes the order a
little worse, never a test fail. To measure the costs again::

    VIKINGBOT_FILE_COSTS=write uv run --all-extras --dev pytest -n 3 --dist loadfile

The workers put their collected items in this order (``sort_items``, a stable
sort: each file's tests stay together and in their order), and
``tests/conftest.py`` turns xdist's reordering off so the controller hands the
files out as collected.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

COSTS = Path(__file__).with_name("file_costs.json")
SECONDS_PER_TEST = 0.05  # a file not in file_costs.json
LISTED_FROM_S = 1.0  # files cheaper than this are left out of file_costs.json


def file_of(nodeid: str) -> str:
    """``tests/e2e/test_x.py`` of ``tests/e2e/test_x.py::test_y[z]`` (xdist's loadfile scope)."""
    return nodeid.split("::", 1)[0]


def sort_items(items: list[pytest.Item]) -> None:
    """Most costly file first; within a file, the collected order."""
    try:
        known: dict[str, float] = json.loads(COSTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    counts = Counter(file_of(item.nodeid) for item in items)
    cost = {f: known.get(f, SECONDS_PER_TEST * n) for f, n in counts.items()}
    items.sort(key=lambda item: -cost[file_of(item.nodeid)])


class Recorder:
    """Adds up each file's seconds (setup, call and teardown of its tests) in the
    process that sees every report (the xdist controller, or a serial run), and
    writes ``file_costs.json`` at the end when ``VIKINGBOT_FILE_COSTS=write``."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @staticmethod
    def wanted(config: pytest.Config) -> bool:
        return os.environ.get("VIKINGBOT_FILE_COSTS") == "write" and not hasattr(
            config, "workerinput"
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus != 0:
            return  # a failed or interrupted run measures the wrong thing
        listed = {f: round(s, 1) for f, s in self.seconds.items() if s >= LISTED_FROM_S}
        ordered = dict(sorted(listed.items(), key=lambda kv: -kv[1]))
        COSTS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
