"""What skills cost (issue 34): prompt characters, discovery time, and heartbeat model calls.

1. Characters the skill list adds to a turn's system prompt, with 20 typical skills and with
   500 (listed: at most 100, descriptions at most 1,024 characters), beside the same prompt
   with no skills.
2. Discovering 500 skills (``skills.discover.catalog``, what each turn asks): the first look
   in a process (an empty cache; files in the page cache) and a look after nothing changed,
   each beside a bare loop doing only the file system work that look cannot avoid (reading
   500 files; ``lstat``-ing 500 files).
3. A scheduled HEARTBEAT.md entry that names a skill, run by a real heartbeat cycle (built-in
   loop, ``openai`` SDK, the loopback fake) against a scripted model that behaves as a real
   one does: it calls ``read_file`` on HEARTBEAT.md while the task is not in what it was sent,
   calls the ``skill`` tool while the skill's instructions are not, then answers
   ``HEARTBEAT_OK``. Model calls per no-op turn with ``skill: weekly-report``, beside the
   same entry that only says "use the weekly-report skill" in its task.

    uv run --all-extras --dev python bench/skills.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _heartbeat_setup import make_runtime, with_tasks, write_session  # noqa: E402
from loguru import logger  # noqa: E402

from vikingbot.agent.context import system_prompt  # noqa: E402
from vikingbot.clock import FakeClock  # noqa: E402
from vikingbot.gateway import compose  # noqa: E402
from vikingbot.replies import OK_TOKEN  # noqa: E402
from vikingbot.session.types import SessionKey  # noqa: E402
from vikingbot.skills import discover  # noqa: E402
from vikingbot.skills.prompt import listing  # noqa: E402
from vikingbot.testing.fake_llm import RecordedRequest, Step, reply, tool_call  # noqa: E402
from vikingbot.testing.fake_openai import FakeOpenAI  # noqa: E402

OWNER = SessionKey("telegram", "default", "42")
BODY_MARK = "Collect the week's notes from notes/"
TASK = "Write this week's report if it is Friday; otherwise there is nothing to do."


def typical(i: int) -> str:
    """A description of typical length (skills in the wild: one or two sentences)."""
    return (
        f"Procedure number {i} for a recurring chore: what to check, in which order, and what "
        "the result looks like. Use when the user asks for it or a heartbeat entry names it."
    )


def make_skills(root: Path, n: int, description: Callable[[int], str] = typical) -> None:
    for i in range(n):
        folder = root / f"skill-{i:03d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:03d}\ndescription: {description(i)}\n---\n"
            f"# Skill {i}\n\n1. {BODY_MARK}\n2. Write the summary.\n" + "More steps.\n" * 40
        )


def prompt_chars(n: int, description: Callable[[int], str] = typical) -> tuple[int, int]:
    """(system prompt characters without skills, with ``n`` skills)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "skills"
        make_skills(root, n, description)
        found = discover.catalog(user=root)
        now = datetime(2026, 3, 10, 12, tzinfo=UTC)

        def build(skills: str | None) -> str:
            return system_prompt(
                Path(tmp),
                [],
                now=now,
                timezone="UTC",
                session_key=OWNER,
                metadata={},
                skills=skills,
            )

        return len(build(None)), len(build(listing(found)))


def timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def fmt(ms: list[float]) -> str:
    return f"median {statistics.median(ms):.3f} ms (min {min(ms):.3f}, max {max(ms):.3f})"


def discovery(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "skills"
        make_skills(root, 500)
        time.sleep(discover._SETTLED_NS / 1e9 + 0.2)  # files older than the racy window
        files = [str(root / f"skill-{i:03d}" / "SKILL.md") for i in range(500)]

        def cold() -> None:
            discover._CACHE.clear()
            discover.catalog(user=root)

        def bare_read() -> None:
            for f in files:
                with open(f, "rb") as fh:
                    fh.read()

        def bare_lstat() -> None:
            for f in files:
                os.lstat(f)

        assert len(discover.catalog(user=root).skills) == 500
        print(f"  cold (empty cache):      {fmt(timed(cold, rounds))}")
        print(f"    bare: read 500 files:  {fmt(timed(bare_read, rounds))}")
        discover.catalog(user=root)
        print(
            "  nothing changed:         "
            f"{fmt(timed(lambda: discover.catalog(user=root), rounds * 10))}"
        )
        print(f"    bare: lstat 500 files: {fmt(timed(bare_lstat, rounds * 10))}")


# ------------------------------------------------------------------ heartbeat


def real_model(task: str, request: RecordedRequest) -> Step:
    """A model that reads HEARTBEAT.md when the task is not in its context and loads the
    skill when its instructions are not, then finds nothing to do."""
    offered = {(t.get("function") or t).get("name") for t in request.body.get("tools") or []}
    text = request.text
    if task not in text and "read_file" in offered:
        return tool_call("read_file", {"path": "HEARTBEAT.md"})
    if BODY_MARK not in text and "skill" in offered:
        return tool_call("skill", {"name": "weekly-report"})
    return reply(OK_TOKEN)


async def heartbeat_calls(entry: str, turns: int) -> list[int]:
    """Model calls per turn of one scheduled entry, over ``turns`` due runs."""
    clock = FakeClock(datetime(2026, 3, 10, 9, tzinfo=UTC))
    with FakeOpenAI.start() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.responder = lambda r: real_model(TASK, r)
        home = Path(tmp)
        cfg: dict[str, Any] = {
            "bot": {
                "owner": "telegram:42",
                "agents": {"provider": "openai", "model": "fake-model"},
                "providers": {
                    "openai": {"api_base": fake.base_url, "api_key": "sk-test", "max_retries": 0}
                },
                "channels": {"telegram": {"enabled": True, "token": "t", "allow_from": ["42"]}},
                "heartbeat": {"timezone": "UTC"},
            }
        }
        rt = make_runtime(home, clock, cfg)
        skill = home / "skills" / "weekly-report"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: weekly-report\ndescription: Write the weekly report.\n---\n"
            f"1. {BODY_MARK}\n2. Send the report with the message tool.\n"
        )
        calls: list[int] = []
        try:
            ws = rt.workspaces.workspace_for(OWNER)
            (ws / "HEARTBEAT.md").write_text(with_tasks(entry))
            svc = compose.heartbeat(rt)
            await svc.run_cycle("scheduled")  # the entry is first seen
            for _ in range(turns):
                clock.advance(hours=1, seconds=1)
                write_session(rt.paths.sessions_dir, OWNER, clock.now() - timedelta(minutes=5))
                before = len(fake.requests)
                await svc.run_cycle("scheduled")
                calls.append(len(fake.requests) - before)
        finally:
            await rt.aclose()
    return calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    logger.remove()

    print("1. characters the skill list adds to the system prompt")
    for n, label in ((20, "20 typical skills"), (500, "500 typical skills")):
        base, with_skills = prompt_chars(n)
        print(f"  {label}: +{with_skills - base} chars ({base} without skills)")
    base, with_skills = prompt_chars(500, lambda i: "x" * 5000)
    print(f"  500 skills, 5,000-char descriptions: +{with_skills - base} chars (capped)")

    print("2. discovering 500 skills (one look, as each turn asks)")
    discovery(args.rounds)

    print("3. a scheduled heartbeat entry naming a skill: model calls per no-op turn")
    named = "- every: 1h title: Report skill: weekly-report task: " + TASK
    plain = "- every: 1h title: Report task: Use the weekly-report skill. " + TASK
    for label, entry in (("skill: weekly-report", named), ("baseline, task names it", plain)):
        calls = asyncio.run(heartbeat_calls(entry, 3))
        print(f"  {label}: {calls}")


if __name__ == "__main__":
    main()
