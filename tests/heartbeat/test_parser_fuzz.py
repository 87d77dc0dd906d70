"""Fuzzing parse + plan + due maths: 20,000 hostile HEARTBEAT.md files, not one exception.

Each hypothesis example seeds a generator that builds ``FILES_PER_EXAMPLE``
files (one draw per file would make the budget minutes, not seconds). The
generator and the checks are shared with ``bench/fuzz_heartbeat.py``, which
runs as many files as asked and adds full-size files.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile_heartbeat import check_file, hostile_file

FILES_PER_EXAMPLE = 20
settings.register_profile(
    "heartbeat-fuzz",
    max_examples=1000,  # x FILES_PER_EXAMPLE = 20,000 files
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@settings(settings.get_profile("heartbeat-fuzz"))
@given(st.integers(min_value=0, max_value=2**63))
def test_no_file_crashes_parse_plan_or_due_maths(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(FILES_PER_EXAMPLE):
        text = hostile_file(rnd, max_lines=12)
        problem = check_file(text, rnd)
        assert problem is None, f"{problem}\nfile: {text!r}"


def test_generator_reaches_the_reported_crashes() -> None:
    """The generator writes the lines that crashed the old parser, so a regression is found."""
    rnd = random.Random(7)
    texts = "\n".join(hostile_file(rnd) for _ in range(3000))
    assert "TİTLE:" in texts and "9999999d" in texts and "٠٩:٣٠" in texts
