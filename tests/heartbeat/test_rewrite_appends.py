"""The locked rewrite against a real process appending to HEARTBEAT.md without the lock.

An editor or a script (``echo ... >> HEARTBEAT.md``) does not take vikingbot's
lock. The rewrite compares the file's identity right before its rename and
redoes the edit on the fresh text when it changed: every rewrite wins within
the bounded number of tries, and not one appended line is lost.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import Complete, apply_moves

APPENDER = r"""
import sys, time
path, rate = sys.argv[1], float(sys.argv[2])
n = 0
print("ready", flush=True)
start = time.monotonic()
while True:
    n += 1
    with open(path, "a") as fh:
        fh.write(f"- appended {n}\n")
    # a steady rate, not a burst: the next append is due at start + n / rate
    time.sleep(max(0.0, start + n / rate - time.monotonic()))
"""
TASKS = 20


def test_rewrites_win_against_a_steady_stream_of_appends(tmp_path: Path) -> None:
    path = tmp_path / "HEARTBEAT.md"
    path.write_text(
        "## Active Tasks\n" + "".join(f"- task {i}\n" for i in range(TASKS)) + "## Completed\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(path), "160"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        reports = [
            apply_moves(path, [Complete(f"task {i}", date(2026, 1, 5))]) for i in range(TASKS)
        ]
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert all(r.applied and not r.skipped for r in reports), [r.skipped for r in reports]
    text = path.read_text()
    parsed = parse_heartbeat(text)
    appended = sorted(
        int(e.text.split()[1]) for e in parsed.entries if e.text.startswith("appended")
    )
    assert appended, "the appender never ran"
    assert appended == list(range(1, appended[-1] + 1))  # not one appended line lost
    done = [e.text for e in parsed.entries if e.checked and e.text.startswith("task")]
    assert not parsed.active  # appended lines landed under Completed (the end of the file)
    assert sorted(done) == sorted(f"task {i} (done 2026-01-05)" for i in range(TASKS))
